"""LoCoMo as the locomo bench reads it: the splits, the question categories, the turns and
questions of a split (``load``), a turn's text, and the ``--compare`` options."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from memstream.core import PermanentError

SPLITS = {
    "dev": ("conv-26", "conv-30", "conv-41", "conv-42", "conv-43", "conv-44", "conv-47"),
    "test": ("conv-48", "conv-49", "conv-50"),
}
SPLITS["all"] = SPLITS["dev"] + SPLITS["test"]


CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}


class BenchDataError(PermanentError, ValueError):
    """The benchmark's data files are missing or not what the benchmark reads."""


def parse_when(text: str) -> datetime:
    return datetime.strptime(" ".join(text.split()), "%I:%M %p on %d %B, %Y").replace(tzinfo=UTC)


def load(data: Path, split: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Turns and questions of the split (BenchDataError if the files are not LoCoMo's)."""
    turns_file, qrels_file = data / "locomo10_turns.jsonl", data / "locomo10_qrels.jsonl"
    for f in (turns_file, qrels_file):
        if not f.exists():
            raise BenchDataError(
                f"{f} not found: --data is the LoCoMo directory with locomo10_turns.jsonl and locomo10_qrels.jsonl"
            )
    convs = set(SPLITS[split])
    try:
        turns = [t for t in map(json.loads, turns_file.read_text().splitlines()) if t["sample_id"] in convs]
        qs = [q for q in map(json.loads, qrels_file.read_text().splitlines()) if q["sample_id"] in convs and q["gold_dia_ids"]]
    except (ValueError, KeyError) as exc:
        raise BenchDataError(f"not LoCoMo data: {type(exc).__name__}: {exc}") from exc
    if not turns or not qs:
        raise BenchDataError(f"no turns or questions of the {split} split ({', '.join(sorted(convs))}) in {data}")
    return turns, qs


def unit_text(t: dict[str, Any]) -> str:
    caption = t.get("blip_caption")
    return f"{t['speaker']}: {t['text']}" + (f" [shares {caption}]" if caption else "")


def parse_options(text: str) -> dict[str, Any]:
    """``"a=1,b=true"`` -> ``{"a": 1, "b": True}`` (ints, ``true``/``false``, else text);
    ``BenchDataError`` for an item without ``=``. The projection validates the names."""
    out: dict[str, Any] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise BenchDataError(f"--compare takes OPTION=VALUE[,...], got {item!r}")
        v: Any = value.strip()
        if v.lower() in ("true", "false"):
            v = v.lower() == "true"
        else:
            try:
                v = int(v)
            except ValueError:
                pass
        out[name.strip()] = v
    return out
