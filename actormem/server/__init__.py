"""`actormem serve`: one memory served over HTTP/JSON to many processes (docs/server.md)."""
