"""Bytes read from Redis as text: one home for the three ways memstream decodes them.

Everything read from the shared Redis is untrusted, so each caller says what it needs:
``as_str`` for values memstream itself wrote as UTF-8 (ids, group names, positions),
``shown`` for text meant for people and JSON (never raises: undecodable bytes become
backslash escapes), ``lossless`` for text that must encode back to the same bytes
(undecodable bytes become surrogate escapes).

Counters are numbers anyone who may write their hash can replace with anything (a tenant's
own counters are its to write): ``count`` reads one, ``counts`` a hash of them, and neither
raises; what is no count is left out and counted, never trusted.
"""

from __future__ import annotations

__all__ = ["as_str", "shown", "lossless", "count", "counts", "COUNT_MAX"]

COUNT_MAX = (1 << 63) - 1  # what HINCRBY can hold


def as_str(value: object) -> str:
    """``value`` as text: bytes decoded as UTF-8 (strict), anything else through ``str``."""
    return value.decode() if isinstance(value, bytes) else str(value)


def shown(value: object) -> str:
    """Text for people and JSON: undecodable bytes as backslash escapes. Never raises."""
    return value.decode("utf-8", "backslashreplace") if isinstance(value, bytes) else str(value)


def lossless(value: object) -> str:
    """Text that encodes back to the same bytes (``surrogateescape``). Never raises."""
    return value.decode("utf-8", "surrogateescape") if isinstance(value, bytes) else str(value)


def count(value: object) -> int | None:
    """A counter's value read from Redis: a whole number 0 .. ``COUNT_MAX`` written in
    decimal digits (bytes, text or int), else None (garbage: ``NaN``, ``-1``, ``1e9``, ``0x10``,
    20 digits, not UTF-8). Never raises."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value if 0 <= value <= COUNT_MAX else None
    if isinstance(value, bytes):
        if not (0 < len(value) <= 19 and value.isdigit()):
            return None
        got = int(value)
        return got if got <= COUNT_MAX else None
    if isinstance(value, str):
        if not (0 < len(value) <= 19 and value.isascii() and value.isdigit()):
            return None
        got = int(value)
        return got if got <= COUNT_MAX else None
    return None


def counts(raw: object) -> tuple[dict[str, int], int]:
    """A hash of counters as read from Redis (HGETALL): ``(field -> count, fields left out)``,
    the fields whose name is UTF-8 and whose value is a ``count``. Never raises."""
    out: dict[str, int] = {}
    garbage = 0
    for field, value in raw.items() if isinstance(raw, dict) else ():
        n = count(value)
        try:
            name = field.decode() if isinstance(field, bytes) else str(field)
        except UnicodeDecodeError:
            n = None
        if n is None:
            garbage += 1
            continue
        out[name] = n
    return out, garbage
