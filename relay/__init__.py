"""relay: the webhook notification relay."""

__version__ = "0.1.0"
