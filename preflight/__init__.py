"""preflight: find what will make a GPU training or inference job fail, before it starts."""

__version__ = "0.1.0"
