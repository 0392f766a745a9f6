"""Job persistence behind a small protocol: SQLite (``sqlite``) and in-memory."""
