"""projections: read models rebuilt from the log and the query side."""

__all__: list[str] = []
