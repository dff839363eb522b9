"""Cleaning of text that comes from outside (hook arguments, the CLI).

Guarantee: ``clean_text`` never raises; it returns valid UTF-8 text no longer than
``max_bytes`` and says what it had to change, so callers can count and flag it.
"""

from __future__ import annotations

__all__ = ["clean_text", "CLIPPED_MARK"]

CLIPPED_MARK = "\n[… clipped by memstream]"
_MARK_BYTES = len(CLIPPED_MARK.encode("utf-8"))  # not len(): the mark is not ASCII


def clean_text(value: object, max_bytes: int) -> tuple[str, list[str]]:
    """(text, problems): None -> "", other types -> str(), lone surrogates replaced,
    text over ``max_bytes`` UTF-8 bytes clipped (with a visible mark)."""
    problems: list[str] = []
    if value is None:
        return "", problems
    if not isinstance(value, str):
        problems.append(f"not a string ({type(value).__name__})")
        try:
            value = str(value)
        except Exception:
            return "", problems + ["unprintable"]
    if value.isascii():
        if len(value) <= max_bytes:
            return value, problems
        return value[: max(0, max_bytes - _MARK_BYTES)] + CLIPPED_MARK, problems + ["clipped"]
    try:
        data = value.encode("utf-8")
    except UnicodeEncodeError:
        problems.append("invalid surrogates replaced")
        data = value.encode("utf-8", "replace")
        value = data.decode("utf-8")
    if len(data) <= max_bytes:
        return value, problems
    keep = max(0, max_bytes - _MARK_BYTES)
    return data[:keep].decode("utf-8", "ignore") + CLIPPED_MARK, problems + ["clipped"]
