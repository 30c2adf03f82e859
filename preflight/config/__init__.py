"""The site configuration and the declaration of every setting."""
