"""OpenDDB: a DynamoDB-compatible database server."""

__version__ = "0.1.0"
