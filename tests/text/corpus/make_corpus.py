"""Write the labelled corpus of secret redaction that tests/text/test_redaction_corpus.py reads.

    .venv/bin/python tests/text/corpus/make_corpus.py

secrets_tuned.jsonl, secrets_heldout.jsonl: one labelled secret a line (text, secrets,
kind, form, part); ordinary.jsonl.gz: one ordinary turn a line (a JSON string);
ordinary_digests_tuned.jsonl, ordinary_digests_heldout.jsonl: ordinary technical turns that
name hex digests (one JSON string a line). Every
value is made up by memstream.bench.testbed.secretcorpus from a seeded generator: none is a real
credential. The ordinary turns include paragraphs of the standard library's docstrings
(PSF licence) as found by the Python that runs this script; the committed files are what
the tests read, so a regeneration on another Python may change them.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

from memstream.bench.testbed.secretcorpus import PARTS, ordinary, ordinary_digests, secrets

HERE = Path(__file__).resolve().parent


def main() -> None:
    for part in PARTS:
        with open(HERE / f"secrets_{part}.jsonl", "w", encoding="utf-8") as f:
            for item in secrets(part):
                f.write(json.dumps(item, ensure_ascii=False) + "\n")
        with open(HERE / f"ordinary_digests_{part}.jsonl", "w", encoding="utf-8") as f:
            for text in ordinary_digests(part):
                f.write(json.dumps(text, ensure_ascii=False) + "\n")
    with gzip.GzipFile(HERE / "ordinary.jsonl.gz", "wb", mtime=0) as g:
        for text in ordinary():
            g.write((json.dumps(text, ensure_ascii=False) + "\n").encode("utf-8"))


if __name__ == "__main__":
    main()
