"""projections: read models rebuilt from the log (Qdrant collections, the facts table)
and the query side. Backends are imported on first use (``open_store``): qdrant-client
alone takes about a second to import."""
