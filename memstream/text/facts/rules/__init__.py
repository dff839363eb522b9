"""The rule families of the fact extractor, one module each: ``terse``, ``identity``,
``preferences``, ``tools``, ``decisions``, ``constraints``, ``notes`` and ``values``.

A family reads a sentence (its clauses, or its body without leading filler) and proposes
facts by calling ``add(kind, subject, key, value, text, confidence)``; the extractor
(``memstream.text.facts.extract``) decides which families read which sentence and keeps
each fact once."""

from __future__ import annotations

from typing import Callable

__all__ = ["Add"]

Add = Callable[[str, str, str, str, str, float], None]
