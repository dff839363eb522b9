"""The kinds of fact the extractor (``memstream.text.facts.extract``) produces: one list for the extractor,
the facts table and the agent's ``memstream_facts`` tool (its schema's enum and the check
of its ``kind`` argument). Here, in the light package the provider already imports, so
that the provider does not load the workers (numpy, the stores) to describe a tool."""

from __future__ import annotations

__all__ = ["FACT_KINDS"]

FACT_KINDS: tuple[str, ...] = (
    "identity",
    "preference",
    "dislike",
    "tool",
    "decision",
    "constraint",
    "value",
    "note",
    "question",
    "done",
    "tentative",
)
