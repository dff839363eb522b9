"""``memstream doctor`` shows the configuration in effect: every setting (secrets masked),
the embedder the projections would use, and every variable or file key that is no setting."""

from __future__ import annotations

import json

from memstream import cli


def doctor(capsys, monkeypatch, env: dict[str, str], *argv: str) -> tuple[int, str]:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    code = cli.main(["doctor", *argv])
    return code, capsys.readouterr().out


REMOTE = {
    "MEMSTREAM_EMBEDDER": "openai",
    "MEMSTREAM_EMBED_URL": "https://ops:pw-planted@llm.example/v1",
    "MEMSTREAM_EMBED_API_KEY": "sk-planted-key",
    "MEMSTREAM_EMBED_DIM": "768",
}


def test_doctor_prints_a_line_for_the_embedder_in_effect_with_its_url_masked(capsys, monkeypatch):
    _, out = doctor(capsys, monkeypatch, REMOTE)
    assert ("[ok] embedder: embedder=openai, url=https://ops:***@llm.example/v1, model=text-embedding-3-small, dim=768") in out
    assert "pw-planted" not in out and "sk-planted-key" not in out


def test_doctor_shows_the_local_model_with_its_threads(capsys, monkeypatch):
    _, out = doctor(capsys, monkeypatch, {"MEMSTREAM_EMBEDDER": "onnx-minilm", "MEMSTREAM_EMBED_THREADS": "3"})
    assert "[ok] embedder: embedder=onnx-minilm, model=all-MiniLM-L6-v2-onnx-int8, dim=384, threads=3" in out


def test_doctor_json_carries_every_setting_with_the_key_masked(capsys, monkeypatch):
    _, out = doctor(capsys, monkeypatch, REMOTE, "--json")
    report = json.loads(out)
    shown = report["checks"]["config"]["settings"]
    assert shown["embed_api_key"] == "***" and shown["embed_url"] == "https://ops:***@llm.example/v1"
    assert (shown["embed_dim"], shown["embed_threads"], shown["stall_after_s"]) == (768, 0, 60.0)
    assert report["checks"]["embedder"] == {
        "ok": True,
        "state": "ok",
        "embedder": "openai",
        "url": "https://ops:***@llm.example/v1",
        "model": "text-embedding-3-small",
        "dim": 768,
    }
    assert "pw-planted" not in out and "sk-planted-key" not in out


def test_doctor_fails_its_config_check_for_a_misspelt_variable(capsys, monkeypatch):
    code, out = doctor(capsys, monkeypatch, {"MEMSTREAM_EMBED_MODLE": "m"})
    assert code == 1
    assert ("[FAIL] config: MEMSTREAM_EMBED_MODLE is not a setting (did you mean MEMSTREAM_EMBED_MODEL?); ignored") in out


def test_doctor_fails_its_embedder_check_for_an_unknown_embedder(capsys, monkeypatch):
    code, out = doctor(capsys, monkeypatch, {"MEMSTREAM_EMBEDDER": "word2vec"})
    assert code == 1
    assert "[FAIL] embedder: unknown embedder 'word2vec'" in out
