"""Token estimates (memstream.text.tokens): one home for every estimate in memstream."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import memstream
from memstream.text import CHARS_PER_TOKEN, estimate_tokens, prompt_tokens

SAMPLES = [
    "",
    "the cat sat",
    "9f2c1e7a",
    "我们决定用 Redis 做队列。",
    "서울에서 만나요",
    "Der Schlüsselbund liegt auf dem Küchentisch.",
    "x" * 1000,
]


def test_no_module_but_text_tokens_defines_a_token_estimate():
    root = Path(memstream.__file__).parent
    found = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.FunctionDef) and node.name in ("estimate_tokens", "approx_tokens", "prompt_tokens"):
                found.append(f"{path.relative_to(root)}:{node.name}")
    assert found == ["text/tokens.py:estimate_tokens", "text/tokens.py:prompt_tokens"]


def test_chunking_the_block_and_the_remote_embedders_use_the_estimates_of_text_tokens():
    from memstream.projections.embedders.remote import OllamaEmbedder, OpenAIEmbedder
    from memstream.provider import block
    from memstream.text import chunking

    assert chunking.estimate_tokens is estimate_tokens  # chunk()'s default counter
    assert block.prompt_tokens is prompt_tokens and block.CHARS_PER_TOKEN == CHARS_PER_TOKEN
    for embedder in (
        OpenAIEmbedder(base_url="http://127.0.0.1:9", model="m", dim=3),
        OllamaEmbedder(base_url="http://127.0.0.1:9", model="m", dim=3),
    ):
        assert [embedder.count_tokens(s) for s in SAMPLES] == [estimate_tokens(s) for s in SAMPLES]


@pytest.mark.parametrize(("text", "tokens"), [("", 1), ("abcd", 1), ("abcde", 2), ("x" * 400, 100)])
def test_a_prompt_is_estimated_at_four_characters_a_token_and_at_least_one(text, tokens):
    assert prompt_tokens(text) == tokens
