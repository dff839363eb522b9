"""Bytes read from Redis as text: one home for the three ways memstream decodes them.

Everything read from the shared Redis is untrusted, so each caller says what it needs:
``as_str`` for values memstream itself wrote as UTF-8 (ids, group names, positions),
``shown`` for text meant for people and JSON (never raises: undecodable bytes become
backslash escapes), ``lossless`` for text that must encode back to the same bytes
(undecodable bytes become surrogate escapes).
"""

from __future__ import annotations

__all__ = ["as_str", "shown", "lossless"]


def as_str(value: object) -> str:
    """``value`` as text: bytes decoded as UTF-8 (strict), anything else through ``str``."""
    return value.decode() if isinstance(value, bytes) else str(value)


def shown(value: object) -> str:
    """Text for people and JSON: undecodable bytes as backslash escapes. Never raises."""
    return value.decode("utf-8", "backslashreplace") if isinstance(value, bytes) else str(value)


def lossless(value: object) -> str:
    """Text that encodes back to the same bytes (``surrogateescape``). Never raises."""
    return value.decode("utf-8", "surrogateescape") if isinstance(value, bytes) else str(value)
