"""``memstream bench locomo``: evidence recall on LoCoMo, through memstream's real paths.

Protocol (the team's retrieval benchmark notes, section 2): one index per conversation
(here: one agent scope per ``sample_id``, tenant ``bench``); the unit is a dialog turn,
its text ``"<speaker>: <text>"`` plus ``" [shares <caption>]"``; the query is the question
verbatim; gold = ``gold_dia_ids`` (questions without evidence excluded); categories 1-4
are the headline, 5 is reported apart.

What runs: a real Valkey and the real pipeline (turns projection, the configured
embedder, the embedded store) in a temp home. Every turn goes in as a ``TurnRecorded``
event (``occurred_at`` = its session's date-time, a second per turn), through
``EventLog.append`` and ``Pipeline.drain``; every question goes through the query path
prefetch and ``memstream_search`` use: a request on the query list (``memstream.query.ask``, op
``search``, kind ``turns``, scope ``current``) answered by the pipeline's query server. Latency is
measured around ``ask`` (warm, one client).

Baselines on the same questions, in the same run: BM25 (Porter-stemmed, stop words out:
the tokeniser of ``memstream.projections.sparse``; k1 1.2, b 0.75, in memory) and dense-only (the
same embedder, cosine over the plain unit texts). memstream's ratio to each is reported.

The data is CC BY-NC: pass its directory; nothing of it ships with memstream.

The package: ``data`` (the splits, loading, the options), ``scoring`` (recall at k, BM25,
paired comparisons), ``measure`` (the run), ``report`` (the tables).
"""

from __future__ import annotations

import argparse

from memstream.bench.command import BenchError, show
from memstream.bench.locomo.data import SPLITS, BenchDataError, parse_options
from memstream.bench.locomo.measure import TARGETS, locomo
from memstream.bench.locomo.paths import PATHS
from memstream.bench.locomo.report import format_compare, format_locomo
from memstream.bench.locomo.scoring import BM25, paired, paired_runs
from memstream.core import Settings, argtypes
from memstream.query import most

__all__ = [
    "BM25",
    "SPLITS",
    "TARGETS",
    "BenchDataError",
    "add_arguments",
    "format_compare",
    "format_locomo",
    "locomo",
    "paired",
    "paired_runs",
    "parse_options",
    "run",
]


# -- the command ---------------------------------------------------------------------------------
def add_arguments(parser: argparse.ArgumentParser) -> None:
    """``memstream bench locomo``'s arguments."""
    parser.add_argument("--data", default="", help="the LoCoMo directory (locomo10_turns.jsonl, locomo10_qrels.jsonl): required")
    parser.add_argument("--split", default="dev", choices=["dev", "test", "all"], help="conversations to run (default dev)")
    default = Settings().embedder  # the product's, what a new install embeds with
    parser.add_argument(
        "--embedder", default=default, help=f"embedder of the benchmark's pipeline (default {default}, the product's)"
    )
    parser.add_argument(
        "--compare",
        default=None,
        metavar="OPTION=VALUE[,...]",
        help="also rebuild the turns projection as v2 with these options from the same "
        "events and report v1 and v2 side by side (an empty value: v2 with the defaults)",
    )
    parser.add_argument(
        "--paths",
        default=",".join(PATHS),
        help=(
            f"the read paths to ask, comma-separated, of {', '.join(PATHS)} (default all); each is paired with "
            "prefetch, and prefetch-ranking and search+rerank-ce40 (the late interaction off) and search+rerank-hand "
            "(the rerank's hand-weighted order) with the path each stands beside"
        ),
    )
    parser.add_argument(
        "--rerank-candidates",
        type=argtypes.int_between(2, most("search", "rerank_candidates")),
        default=None,
        help="how many of the ranking's best the search+rerank path reranks (default: the protocol's, 30)",
    )
    parser.add_argument(
        "--rerank-grid",
        action="store_true",
        help="also score the best 50 of search with the cross-encoder once and report every candidate "
        "count (20, 30, 50) and weight of the rerank (tuning; dev split only)",
    )
    parser.add_argument(
        "--prefetch-grid",
        action="store_true",
        help="also ask the prefetch path again with the ranking's weights moved (one or two at a time), "
        "each paired with the defaults (tuning; dev split only)",
    )


def run(args: argparse.Namespace) -> int:
    """Run the benchmark as the command line asked; print its table (or JSON)."""
    if not args.data:
        raise BenchError("bench locomo needs --data DIR (the LoCoMo directory: locomo10_turns.jsonl, locomo10_qrels.jsonl)")
    try:
        compare = parse_options(args.compare) if args.compare is not None else None
        paths = tuple(p.strip() for p in args.paths.split(",") if p.strip())
        unknown = sorted(set(paths) - set(PATHS))
        if unknown or not paths:
            raise BenchError(f"--paths takes some of {', '.join(PATHS)}, got {args.paths!r}")
        result = locomo(
            args.data,
            split=args.split,
            embedder=args.embedder or None,
            compare=compare,
            paths=paths,
            rerank_candidates=args.rerank_candidates,
            grid=args.rerank_grid,
            prefetch_points=args.prefetch_grid,
        )
    except BenchDataError as exc:
        raise BenchError(str(exc)) from exc
    return show(args, result, format_locomo(result))
