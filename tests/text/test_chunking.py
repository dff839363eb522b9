"""chunk(): long text into window-sized pieces, cut at the best boundary available."""

from __future__ import annotations

import re

import pytest

from memstream.text import chunk, estimate_tokens

ENGLISH = (
    "The staging cluster was rebuilt on Tuesday after the storage migration. "
    "Every service came back except the billing worker, which kept crashing on start. "
    "We traced it to a stale configuration map that still pointed at the old database host. "
    "After the fix, the worker drained its backlog in about twenty minutes. "
)
GERMAN = (
    "Ich wohne in München und arbeite bei einer großen Versicherungsgesellschaft. Wir verwenden "
    "Kubernetes für die Bereitstellung und haben beschlossen, die Datenbank zu migrieren. "
)
CODE = (
    "def apply(self, entries):\n    for entry_id, fields in entries:\n"
    "        event = decode(fields[b'event'])\n        self.store.upsert(point_id(event.id), event)\n"
    "    self.positions.record(self.name, entries[-1][0])\n"
)
CHINESE = "我们决定使用PostgreSQL作为主数据库，因为它支持事务和复杂查询。部署在阿里云上，版本是16。"
JAPANESE = "今日は東京で会議があります。明日は大阪に移動して、新しいプロジェクトの打ち合わせをします。"
KOREAN = "저는 서울에 살고 있습니다. 우리 팀은 파이썬과 러스트를 사용합니다. 다음 주에 배포할 예정입니다. "
HASHES = "commits 9f2c1e7a3b4d5e6f708192a3b4c5d6e7f8091a2b and a3f9c2e1b7d40123456789abcdef0123456789ab, "
URLS = "see https://github.com/example/repo/blob/9f2c1e7a3b4d5e6f708192a3b4c5d6e7f8091a2b/src/main.py#L10-L40 "

MIXED = "\n\n".join([ENGLISH * 6, GERMAN * 4, CODE * 5, CHINESE * 8, JAPANESE * 8, KOREAN * 6, HASHES * 10, URLS * 8])


@pytest.fixture(scope="module")
def minilm_count():
    import tokenizers

    from memstream.projections.embedders.onnx import TOKENIZER_PATH  # shipped in the package

    tok = tokenizers.Tokenizer.from_file(str(TOKENIZER_PATH))
    tok.no_padding()
    tok.no_truncation()
    return lambda s: len(tok.encode(s).ids)  # includes [CLS] and [SEP]


def _words(text: str) -> list[str]:
    return text.split()


def test_text_that_fits_is_one_stripped_chunk():
    assert chunk("  a short note about Tuesday  ") == ["a short note about Tuesday"]


def test_blank_text_gives_no_chunks():
    assert chunk("") == []
    assert chunk(" \n\t ") == []


@pytest.mark.parametrize("max_tokens", [20, 64, 200])
def test_every_chunk_fits_the_budget_by_the_counter_used(max_tokens):
    chunks = chunk(MIXED, max_tokens=max_tokens, overlap_tokens=max_tokens // 10)
    assert len(chunks) > 1
    assert all(estimate_tokens(c) <= max_tokens for c in chunks)


def test_default_chunks_fit_the_minilm_window_by_the_real_tokenizer(minilm_count):
    chunks = chunk(MIXED)
    assert len(chunks) > 5
    assert max(minilm_count(c) for c in chunks) <= 256


def test_with_the_real_counter_chunks_use_the_whole_window_and_never_exceed_it(minilm_count):
    chunks = chunk(MIXED, max_tokens=256, count_tokens=minilm_count)
    sizes = [minilm_count(c) for c in chunks]
    assert max(sizes) <= 256
    assert max(sizes) > 200  # the specials are counted once per chunk, not once per word


def test_a_counters_fixed_overhead_is_counted_once_per_chunk():
    def count(s: str) -> int:
        return len(s.split()) + 2  # like [CLS] + words + [SEP]

    chunks = chunk(" ".join(f"w{i}" for i in range(100)), max_tokens=12, overlap_tokens=0, count_tokens=count)
    assert [len(c.split()) for c in chunks] == [10] * 10


def test_nothing_is_lost_and_order_is_kept():
    chunks = chunk(MIXED, max_tokens=50, overlap_tokens=0)
    assert re.sub(r"\s+", "", "".join(chunks)) == re.sub(r"\s+", "", MIXED)


def test_a_paragraph_break_is_preferred_to_a_later_sentence_end():
    first = "Alpha beta gamma delta epsilon. " * 6  # about 36 tokens
    second = "Zeta eta theta iota kappa. " * 6
    chunks = chunk(first.strip() + "\n\n" + second.strip(), max_tokens=50, overlap_tokens=0)
    assert chunks[0] == first.strip()


def test_a_sentence_end_is_preferred_to_a_later_space():
    sentence = " ".join(["word"] * 24) + "."
    chunks = chunk(sentence + " " + "more " * 60, max_tokens=40, overlap_tokens=0)
    assert chunks[0] == sentence


def test_a_boundary_that_would_leave_a_chunk_less_than_half_full_is_passed_over():
    text = "One two three. " + "word " * 60
    chunks = chunk(text, max_tokens=40, overlap_tokens=0)
    assert estimate_tokens(chunks[0]) == 40  # filled up, cut at a space


def test_long_prose_is_cut_only_at_sentence_ends():
    chunks = chunk(ENGLISH * 20, max_tokens=60, overlap_tokens=0)
    assert all(c.endswith(".") for c in chunks)


def test_cjk_text_without_spaces_is_split_by_character():
    text = CHINESE * 30
    chunks = chunk(text, max_tokens=40, overlap_tokens=0)
    assert len(chunks) > 10
    assert all(estimate_tokens(c) <= 40 for c in chunks)
    assert "".join(chunks) == text
    assert sum(c.endswith("。") for c in chunks) >= len(chunks) // 2  # prefers the full stop


def test_a_long_unspaced_blob_is_sliced_to_fit():
    blob = "QUJD" * 3000
    chunks = chunk(f"key material: {blob} end", max_tokens=100, overlap_tokens=10)
    assert all(estimate_tokens(c) <= 100 for c in chunks)
    assert blob in re.sub(r"\s+", "", "".join(chunks)).replace("keymaterial:", "")


def test_consecutive_chunks_overlap_by_whole_words_within_the_overlap_budget():
    text = " ".join(f"word{i}" for i in range(400))
    chunks = chunk(text, max_tokens=50, overlap_tokens=10)
    for prev, nxt in zip(chunks, chunks[1:]):
        prev_words, next_words = _words(prev), _words(nxt)
        shared = next(k for k in range(len(next_words), -1, -1) if prev_words[len(prev_words) - k :] == next_words[:k])
        assert 1 <= shared
        assert estimate_tokens(" ".join(next_words[:shared])) <= 10


def test_the_overlap_starts_at_a_sentence_when_one_is_in_reach():
    text = ("Short one. " + "Lorem ipsum dolor sit amet consectetur. ") * 30
    chunks = chunk(text, max_tokens=40, overlap_tokens=12)
    assert all(c[0].isupper() for c in chunks)


def test_without_overlap_chunks_do_not_repeat_text():
    text = " ".join(f"word{i}" for i in range(400))
    chunks = chunk(text, max_tokens=50, overlap_tokens=0)
    assert sum(len(_words(c)) for c in chunks) == 400


def test_chunking_is_deterministic():
    assert chunk(MIXED, max_tokens=80) == chunk(MIXED, max_tokens=80)


@pytest.mark.parametrize(("max_tokens", "overlap"), [(0, 0), (10, 10), (10, -1)])
def test_an_impossible_budget_is_refused(max_tokens, overlap):
    with pytest.raises(ValueError):
        chunk("some text", max_tokens=max_tokens, overlap_tokens=overlap)


def test_the_estimate_counts_han_per_character_and_hangul_higher():
    assert estimate_tokens("") == 0
    assert estimate_tokens("我们决定") == 4
    assert estimate_tokens("서울") == 6
    assert estimate_tokens("the cat sat") == 3
    assert estimate_tokens("9f2c1e7a") == 8  # hex: one piece per character


def test_slices_of_a_mixed_run_still_fit_when_joined_with_their_neighbours():
    text = "x " + "ab12" * 300 + " y z"  # slices "ab", "12" cost less than the run "ab12"
    for overlap in (0, 5, 20):
        chunks = chunk(text, max_tokens=30, overlap_tokens=overlap)
        assert all(estimate_tokens(c) <= 30 for c in chunks)
