"""memstream: event-sourced memory for fleets of Hermes agents (CLI and embedded service)."""

__version__ = "0.1.0"
__all__ = ["__version__"]
