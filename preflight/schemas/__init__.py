"""The JSON Schemas (draft 2020-12) of the documents preflight writes and the site configuration it reads, as
shipped; preflight schema prints them, scripts/make_schemas.py writes them."""
