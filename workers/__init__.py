"""workers: consumer-group workers that project the log (the projection pipeline)."""

__all__: list[str] = []
