"""provider: the Hermes ``MemoryProvider`` plugin (``from provider import MemstreamProvider``).

A thin shell over ``producers``: hooks append events, nothing else.
"""

from provider.provider import MemstreamProvider, register, resolve_agent

__all__ = ["MemstreamProvider", "register", "resolve_agent"]
