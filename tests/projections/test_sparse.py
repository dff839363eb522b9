"""The keyword side: tokens, stems, stable indices, BM25 weights; and point ids."""

from __future__ import annotations

import re
import unicodedata
import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memstream.projections.sparse import VERSION, sparse_vector, stem, token_index, tokenize
from memstream.projections.stores.ids import POINT_NAMESPACE, named_uuid, point_id
from memstream.text.scripts import CJK_RE, HAN_KANA_RANGES, HANGUL_RANGES

# Porter's own examples (1980 paper and his C implementation's vocabulary), as Snowball's
# English (Porter2) stemmer stems them: all as Porter did but "generalization".
PORTER = {
    "caresses": "caress",
    "ponies": "poni",
    "cats": "cat",
    "feed": "feed",
    "agreed": "agre",
    "plastered": "plaster",
    "motoring": "motor",
    "sing": "sing",
    "conflated": "conflat",
    "troubled": "troubl",
    "sized": "size",
    "hopping": "hop",
    "falling": "fall",
    "hissing": "hiss",
    "filing": "file",
    "happy": "happi",
    "sky": "sky",
    "relational": "relat",
    "conditional": "condit",
    "rational": "ration",
    "vietnamization": "vietnam",
    "predication": "predic",
    "operator": "oper",
    "hopefulness": "hope",
    "sensibiliti": "sensibl",
    "triplicate": "triplic",
    "electrical": "electr",
    "goodness": "good",
    "allowance": "allow",
    "airliner": "airlin",
    "adjustable": "adjust",
    "replacement": "replac",
    "adoption": "adopt",
    "homologous": "homolog",
    "effective": "effect",
    "probate": "probat",
    "rate": "rate",
    "controll": "control",
    "roll": "roll",
    "generalization": "general",
}


# Where sparse VERSION 2 (Porter2) stems conversation words (LoCoMo's) apart from VERSION 1
# (Porter): it stops merging words of other meanings and merges adverbs with their adjectives.
PORTER2 = {
    "news": "news",
    "new": "new",
    "used": "use",
    "us": "us",
    "one": "one",
    "on": "on",
    "general": "general",
    "generation": "generat",
    "evening": "evening",
    "even": "even",
    "community": "communiti",
    "communicate": "communic",
    "organization": "organiz",
    "quickly": "quick",
    "hopefully": "hope",
    "tried": "tri",
    "trying": "tri",
    "skies": "sky",
    "dying": "die",
}


@pytest.mark.parametrize("word, expected", sorted(PORTER.items()))
def test_porter_stems_the_reference_examples(word, expected):
    assert stem(word) == expected


@pytest.mark.parametrize("word, expected", sorted(PORTER2.items()))
def test_porter2_keeps_words_of_other_meanings_apart_and_adverbs_with_their_adjectives(word, expected):
    assert stem(word) == expected


def test_stemming_gives_the_same_stems_from_many_threads():
    import threading

    words = sorted(PORTER) * 50
    want = [stem(w) for w in words]
    got: list[list[str]] = []
    threads = [threading.Thread(target=lambda: got.append([stem(w) for w in words])) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert got == [want] * 4


@pytest.mark.parametrize("word", ["deploy", "deploys", "deployed", "deploying", "deployment"])
def test_every_form_of_deploy_shares_one_stem(word):
    assert tokenize(word) == ["deploy"]


def test_english_words_are_case_folded_stemmed_and_stop_words_dropped():
    text = "The quick brown FOXES were running_fast; don't"
    assert tokenize(text) == ["quick", "brown", "fox", "run", "fast"]


@pytest.mark.parametrize(
    "query, document",
    [
        ("서울역", "내일서울역에서만나요"),
        ("北京大学", "我明天去北京大学看朋友"),
        ("東京タワー", "週末に東京タワーへ行きました"),
    ],
)
def test_every_token_of_a_cjk_phrase_occurs_in_unspaced_text_containing_it(query, document):
    q = tokenize(query)
    assert len(q) == 2 * len(query) - 1  # unigrams + bigrams
    assert set(q) <= set(tokenize(document))


def test_width_variants_and_mixed_scripts_normalise_to_the_same_tokens():
    assert tokenize("ＡＢＣ ｶﾀｶﾅ") == tokenize("abc カタカナ")
    assert tokenize("iPhone15を買った")[:2] == ["iphone15", "を"]


def test_the_keyword_side_splits_scripts_where_the_text_scripts_table_does():
    """Every edge of the table in memstream.text.scripts, and the characters of CJK symbols
    and punctuation that are letters or numbers (〡-〩, 〱-〵, 〻, 〼), tokenise as CJK (a
    doubled character gives the character itself, not one word) exactly when the table
    says CJK."""
    edges = {cp + d for lo, hi in HAN_KANA_RANGES + HANGUL_RANGES for cp in (lo, hi) for d in (-1, 0, 1)}
    edges |= {*range(0x3021, 0x302A), *range(0x3031, 0x3036), 0x303B, 0x303C, 0x3005, 0x3006, 0x3007}
    checked = 0
    for cp in sorted(edges):
        ch = chr(cp)
        if unicodedata.normalize("NFKC", ch).casefold() != ch or not re.fullmatch(r"[^\W_]", ch):
            continue  # folded, or not part of a word: the tokenizer never sees it as itself
        assert (ch in tokenize(ch * 2)) == bool(CJK_RE.match(ch)), f"U+{cp:04X}"
        checked += 1
    assert checked > 30


def test_indices_are_pinned_crc32_values_identical_in_every_process():
    # frozen sample: if this changes, stored vectors change (bump VERSION and rebuild)
    assert VERSION == 2
    assert token_index("deploy") == 2453354746
    assert sparse_vector("Deploying 서울역 v2!", k1=None) == (
        [296593912, 2371371774, 2453354746, 2779498962, 3386782558, 4033584399, 4193219318],
        [1.0] * 7,
    )


def test_term_frequency_saturates_and_empty_text_gives_an_empty_vector():
    (_,), (once,) = sparse_vector("invoice")
    (_,), (thrice,) = sparse_vector("invoice invoice invoice")
    assert once < thrice < 3 * once
    assert sparse_vector("invoice invoice", k1=None) == ([token_index("invoic")], [2.0])
    assert sparse_vector("") == ([], [])
    assert sparse_vector("the of and to") == ([], [])


def test_point_ids_are_deterministic_typed_uuid5s():
    assert point_id("fact", "t1", "k") == "c07743bb-64dc-50b8-85dd-f9ef92750e9f"  # frozen
    assert point_id("a", "b") != point_id("a,b") != point_id("ab")
    assert point_id(1) != point_id("1")
    with pytest.raises(ValueError):
        point_id()


@given(st.text(max_size=200))
@settings(max_examples=300)
def test_named_uuid_is_the_standard_uuid5_of_the_point_namespace(name: str) -> None:
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate: no UTF-8, and no id (uuid5 raises the same)
        with pytest.raises(UnicodeEncodeError):
            named_uuid(name)
        return
    assert named_uuid(name) == str(uuid.uuid5(POINT_NAMESPACE, name))
