"""The labelled update dialogues (``tests/text/corpus/updates_{tuned,heldout}.jsonl``), scored
through the facts projection.

Each line is one dialogue: ``turns``, the user's messages in order (one turn each, a
second apart), ``current``, the (subject, key, value) facts that must be current after
the last turn, and ``ended``, those that must not be (superseded or retracted). A
dialogue with nothing ``ended`` is a negative: its later turn states no update of the
user's own ("my sister moved to Lisbon", "if I moved …", a question), and the earlier
value must stay current.

``updates_tuned.jsonl`` was used while writing the update rules; ``updates_heldout.jsonl``
was written with it, before the rules, and never tuned on.

``python tests/support/update_dialogues.py`` prints the figures of both parts.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import fakeredis
from pipeline_support import turn

from memstream.projections import Delivery, FactsProjection

CORPUS = Path(__file__).resolve().parent.parent / "text" / "corpus"
PARTS = ("tuned", "heldout")


def load(part: str) -> list[dict]:
    with open(CORPUS / f"updates_{part}.jsonl", encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def _norm(value: str) -> str:
    return " ".join(value.strip(" \t.,;:!?)\"'").casefold().split())


def current_after(turns: list[str]) -> set[tuple[str, str, str]]:
    """The current (subject, key, value) facts after the user said ``turns``, one turn each."""
    projection = FactsProjection(fakeredis.FakeRedis(), "u")
    events = [turn(text, "Noted.", when=float(i)) for i, text in enumerate(turns)]
    for i, event in enumerate(events, 1):
        projection.apply([Delivery("s", f"{i}-0", {}, event)])
    return {(f.subject, f.key, _norm(f.value)) for f in projection.table.query("t1")}


@dataclass
class Score:
    dialogues: int = 0
    right: int = 0  # dialogues whose every label holds
    kept: int = 0  # "current" labels that are current
    current: int = 0
    ended: int = 0  # "ended" labels that are not current
    to_end: int = 0
    stale: int = 0  # "ended" labels still current
    lost: int = 0  # labels of negative dialogues that are no longer current
    wrong: list[str] = field(default_factory=list)

    def line(self) -> str:
        return (
            f"dialogues right {self.right}/{self.dialogues}; old values ended {self.ended}/{self.to_end} "
            f"(stale {self.stale}); values kept current {self.kept}/{self.current} "
            f"(lost in negatives {self.lost})"
        )


def score(dialogues: list[dict]) -> Score:
    s = Score()
    for d in dialogues:
        now = current_after(d["turns"])
        want = {(sub, key, _norm(v)) for sub, key, v in d["current"]}
        gone = {(sub, key, _norm(v)) for sub, key, v in d["ended"]}
        kept, ended = want & now, gone - now
        s.dialogues += 1
        s.current, s.kept = s.current + len(want), s.kept + len(kept)
        s.to_end, s.ended = s.to_end + len(gone), s.ended + len(ended)
        s.stale += len(gone & now)
        if not gone:
            s.lost += len(want - now)
        if kept == want and ended == gone:
            s.right += 1
        else:
            s.wrong.append(d["turns"][-1])
    return s


if __name__ == "__main__":
    for part in PARTS:
        result = score(load(part))
        print(f"{part}: {result.line()}")
        for text in result.wrong:
            print(f"    wrong: {text}")
