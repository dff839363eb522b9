"""``memstream bench crypto`` on a few events: every figure is there and a sealed body
opens only with its tenant's key (what the benchmark times is real encryption)."""

from __future__ import annotations

import os

import pytest

from memstream.bench.crypto import NONCE, crypto_bench, format_crypto


def test_a_small_run_reports_both_stages_for_each_cipher_against_the_baseline():
    result = crypto_bench(events=20, rounds=3, tenants=2)
    assert result["events"] == 20 and result["body_bytes"]["added"] == NONCE + 16
    for stage in ("ship", "ingest"):
        row = result[stage]
        assert row["baseline_ns_per_event"] > 0
        for name in ("aes-256-gcm", "chacha20-poly1305"):
            assert row[name]["ns_per_event"] > 0 and row[name]["ratio"] > 0
    text = format_crypto(result)
    assert "shipper (encode [+ encrypt])" in text and "aes-256-gcm" in text


def test_a_body_sealed_with_one_tenants_key_does_not_open_with_anothers():
    from cryptography.exceptions import InvalidTag
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    ours, theirs = AESGCM(os.urandom(32)), AESGCM(os.urandom(32))
    nonce = os.urandom(NONCE)
    sealed = ours.encrypt(nonce, b"the door code is 4417", b"event-id")
    assert b"4417" not in sealed and ours.decrypt(nonce, sealed, b"event-id") == b"the door code is 4417"
    with pytest.raises(InvalidTag):
        theirs.decrypt(nonce, sealed, b"event-id")  # the key deleted: the body is noise
