"""provider: the Hermes ``MemoryProvider`` plugin (``from memstream.provider import MemstreamProvider``).

A thin shell over ``producers``: hooks append events, nothing else.
"""

from memstream.provider.block import format_block
from memstream.provider.provider import MemstreamProvider, register, resolve_agent

__all__ = [
    "MemstreamProvider",
    "format_block",
    "register",
    "resolve_agent",
]
