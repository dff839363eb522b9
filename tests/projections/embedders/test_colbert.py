"""``colbert-small``: the late interaction's model makes the dense vector too. A passage's
vector is the mean of the token vectors the dense stage stores for it, a question's the mean
of its question token vectors; a turn and a recall each cost one model call, which these
tests count on the real model."""

from __future__ import annotations

import numpy as np
import pytest
from late_texts import ANSWER, OTHERS, QUESTION

from memstream.core import Settings
from memstream.projections import (
    CachedEmbedder,
    EmbeddingCache,
    LatePassages,
    LateScorer,
    describe_embedder,
    get_embedder,
    text_key,
)
from memstream.projections.embedders import late
from memstream.projections.embedders.colbert import ColbertSmallEmbedder
from memstream.projections.embedders.late import DIM, MAX_CHARS, PASSAGE_TOKENS, QUERY_TOKENS, unpack


class Counted(LateScorer):
    """The real model, its runs counted (texts per run)."""

    def __init__(self) -> None:
        super().__init__(threads=1)
        self.runs: list[int] = []

    def _run(self, rows: list[list[int]]) -> list[np.ndarray]:
        self.runs.append(len(rows))
        return super()._run(rows)


@pytest.fixture
def scorer() -> Counted:
    return Counted()


def test_a_passage_s_vector_is_the_mean_of_its_stored_token_vectors_and_warming_them_runs_no_second_call(scorer, tmp_path):
    embedder = ColbertSmallEmbedder(scorer=scorer)
    texts = [ANSWER, *OTHERS, "a turn of its own " * 3]
    before = len(scorer.runs)
    vectors = embedder.embed(texts)
    assert vectors.shape == (len(texts), DIM) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert scorer.runs[before:] == [len(texts)]  # one call for the batch
    # the dense stage then stores their token vectors: no model call
    cache = EmbeddingCache(tmp_path / "e.sqlite3", memory_items=0)
    passages = LatePassages(cache, lambda: scorer)
    assert passages.warm([(f"ev-{i}", t) for i, t in enumerate(texts)]) == len(texts)
    assert scorer.runs[before:] == [len(texts)]
    stored = cache.get_blobs(LateScorer.name, [text_key(ANSWER)])
    rows = unpack(next(iter(stored.values())))
    assert rows is not None
    mean = rows.mean(axis=0)
    assert np.allclose(vectors[0], mean / np.linalg.norm(mean), atol=1e-6)
    # the same text embedded again, in another batch: the same vector, still no call
    assert np.allclose(embedder.embed([OTHERS[1], ANSWER])[1], vectors[0])
    assert scorer.runs[before:] == [len(texts)]


def test_a_question_is_embedded_with_its_own_mark_and_the_late_interaction_reads_its_rows_without_a_call(scorer):
    questions = ColbertSmallEmbedder(scorer=scorer).for_queries()
    assert questions.name.endswith(":query") and questions.max_tokens == QUERY_TOKENS
    before = len(scorer.runs)
    q = questions.embed([QUESTION])
    rows = scorer.queries([QUESTION])[0]
    assert scorer.runs[before:] == [1]
    mean = rows.mean(axis=0)
    assert np.allclose(q[0], mean / np.linalg.norm(mean), atol=1e-6)
    assert not rows.flags.writeable  # shared with the next caller
    # a question and a passage of the same words are not the same vector
    as_passage = ColbertSmallEmbedder(scorer=scorer).embed([QUESTION])[0]
    assert float(q[0] @ as_passage) < 0.9999


def test_the_question_s_vector_finds_the_passage_that_answers_it(scorer):
    embedder = ColbertSmallEmbedder(scorer=scorer)
    passages = embedder.embed([ANSWER, *OTHERS])
    q = embedder.for_queries().embed([QUESTION])[0]
    scores = passages @ q
    assert int(np.argmax(scores)) == 0, scores


def test_the_cache_s_question_view_is_the_model_s_own_and_never_reads_a_passage_s_vector(scorer, tmp_path):
    cached = CachedEmbedder(ColbertSmallEmbedder(scorer=scorer), tmp_path / "e.sqlite3")
    stored = cached.embed([QUESTION])  # as a passage: written to the file
    view = cached.for_queries()
    assert view.name == cached.name + ":query"
    asked = view.embed([QUESTION])
    assert float(asked[0] @ stored[0]) < 0.9999  # the question's own vector, not the file's passage
    assert cached.cache.count(view.name) == 0  # kept in memory only


def test_long_and_empty_texts_are_cut_never_refused(scorer):
    embedder = ColbertSmallEmbedder(scorer=scorer)
    out = embedder.embed(["word " * 5000, "x" * (MAX_CHARS + 10), ""])
    assert out.shape == (3, DIM) and np.all(np.isfinite(out))
    assert embedder.count_tokens("word " * 100) > PASSAGE_TOKENS == embedder.max_tokens
    assert embedder.embed([]).shape == (0, DIM)


def test_the_scorer_keeps_at_most_its_bound_of_recent_rows(monkeypatch, scorer):
    monkeypatch.setattr(late, "RECENT_BYTES", 100_000)
    fresh = Counted()
    ColbertSmallEmbedder(scorer=fresh).embed([f"passage number {i} about the lake" for i in range(40)])
    assert 0 < fresh.recent.held <= fresh.recent.limit == 100_000
    assert fresh.recent.held == sum(len(b) for b in fresh.recent._items.values())
    fresh.runs.clear()
    fresh.passage_blobs(["passage number 0 about the lake"])  # dropped long ago: run again
    assert fresh.runs == [1]


def test_a_scorer_keeps_no_rows_unless_colbert_small_uses_it():
    plain = Counted()
    plain.passage_blobs([ANSWER])
    plain.queries([QUESTION])
    assert plain.recent.held == 0 and plain.runs == [1, 1]
    plain.passage_blobs([ANSWER])  # bge-small's dense stage: each text is scored once anyway
    assert plain.runs == [1, 1, 1]
    ColbertSmallEmbedder(scorer=plain)
    assert plain.recent.limit == late.RECENT_BYTES


def test_the_factory_and_the_settings_know_colbert_small():
    assert describe_embedder(Settings(embedder="colbert-small")) == {
        "embedder": "colbert-small",
        "model": late.MODEL_ID,
        "dim": DIM,
        "threads": describe_embedder(Settings(embedder="bge-small"))["threads"],
    }
    assert Settings(embedder="colbert-small").late_reranks()
    embedder = get_embedder("colbert-small", threads=1)
    assert isinstance(embedder, ColbertSmallEmbedder) and embedder.threads == 1
    assert embedder.name == f"colbert-small:{late.MODEL_ID}:{PASSAGE_TOKENS}"
