"""The ingest bench's table: ``format_ingest`` renders ``ingest``'s dict."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from memstream.bench.ingest.measure import TARGETS

if TYPE_CHECKING:
    pass


def format_ingest(result: dict[str, Any]) -> str:
    m = result["machine"]
    h, a = result["hash"], result["hash_apart"]
    ok = lambda key: "met" if result["met"].get(key) else "MISSED"  # noqa: E731
    lines = [
        f"memstream bench ingest — {result['date']}",
        f"machine: {m.get('cpus')} CPUs {m.get('cpu_model', '')}, Python {m.get('python')}; load average "
        f"{m.get('loadavg_at_start')} at start, {m.get('loadavg_at_end')} at end",
        f"data: {result['data']}; medians of {result['runs']} runs",
        "",
    ]
    if "onnx" in result:
        lines += _format_onnx(result)
    lines += [
        f"pipeline drain, hash embedder, one process: {h['events']} events = {h['events_per_s']} events/s "
        f"(runs {h['per_run_events_per_s']}; target ≥ {TARGETS['hash_events_per_s']:.0f}: "
        f"{ok('hash_events_per_s')}; {h['cpu_seconds']} CPU s)",
        "  per consumer (s): " + ", ".join(f"{g} {s}" for g, s in h["consumer_seconds"].items()),
        f"pipeline drain, hash embedder, facts and sessions apart: {a['events_per_s']} events/s "
        f"(runs {a['per_run_events_per_s']}; target: {ok('hash_apart_events_per_s')}; {a['cpu_seconds']} CPU s "
        f"in both processes); ratio apart / one process {result['apart_ratio']} (runs {result['per_run_apart_ratio']})",
        "  per consumer (s): " + ", ".join(f"{g} {s}" for g, s in a["consumer_seconds"].items()),
        "",
    ]
    for key, label in (
        ("freshness_hash", "hash"),
        ("freshness_hash_apart", "hash, apart"),
        ("freshness_onnx_low", "onnx-minilm"),
        ("freshness_onnx", "onnx-minilm"),
        ("freshness_onnx_high", "onnx-minilm"),
    ):
        f = result.get(key)
        if not f:
            continue
        met = result["met"].get(f"{key}_keyword_p95", result["met"].get(f"{key}_p95"))
        drain = f.get("backlog_drain_s")
        lines.append(
            f"freshness ({label}), {f['achieved_rate_per_s']} turns/s for {f['produced_seconds']} s: "
            f"append → keyword-searchable p50 {f['keyword_p50_s'] * 1000:.0f} ms, p95 {f['keyword_p95_s'] * 1000:.0f} ms "
            f"(target p95 ≤ 1 s: {'met' if met else 'MISSED'}); → vector-searchable p50 {f['p50_s'] * 1000:.0f} ms, "
            f"p95 {f['p95_s'] * 1000:.0f} ms, max {f['max_s'] * 1000:.0f} ms ({f['visible']}/{f['sampled']} sampled "
            f"turns seen; dense {'inline' if f.get('inline') else 'deferred'}, backlog peak {f.get('backlog_peak')}, "
            f"emptied {'never' if drain is None else f'{drain} s'} after the last append; "
            f"mean embed batch {f['mean_embed_batch']})"
        )
    lines += [
        "",
        "peak RSS (MB): hash drains {}, freshness hash {}{}; process peak {}".format(
            h["peak_rss_mb"],
            result["freshness_hash"]["peak_rss_mb"],
            "".join(
                f", {k.replace('_', ' ')} {result[k]['peak_rss_mb']}"
                for k in ("onnx", "freshness_onnx", "freshness_onnx_low", "freshness_onnx_high")
                if k in result
            ),
            result["ru_maxrss_mb"],
        ),
    ]
    if result.get("profile_top_tottime"):
        lines.append("")
        lines.append("profile (last onnx drain, top by own time):")
        for r in result["profile_top_tottime"][:15]:
            lines.append(f"  {r['tottime']:8.3f} s own  {r['cumtime']:8.3f} s cum  {r['calls']:>8}  {r['function']}")
    return "\n".join(lines)


def _format_onnx(result: dict[str, Any]) -> list[str]:
    o, raw = result["onnx"], result["raw"]
    ok = lambda key: "met" if result["met"].get(key) else "MISSED"  # noqa: E731
    return [
        f"pipeline drain, {o.get('model', 'onnx-minilm')}: {o['events']} events in {o['seconds']} s = "
        f"{o['events_per_s']} events/s "
        f"({o['texts_embedded']} texts embedded in {o['embed_calls']} calls, {o['turn_points']} turn points; "
        f"{o['texts_per_s']:.1f} texts/s)",
        "  per consumer (s): "
        + ", ".join(f"{g} {s}" for g, s in o["consumer_seconds"].items())
        + f"; inside embed: {o['embed_seconds_in_pipeline']} s",
        f"raw models, same texts and calls: {raw['texts_per_s']} texts/s ({raw['seconds']} s; "
        f"{raw['threads']} threads, model batch {raw['batch_size']}"
        + (f"; the late-interaction model's passages too: {raw['late_texts']} texts" if raw.get("late_texts") else "")
        + ")",
        f"ratio pipeline/raw: {result['ratio']} (runs {result['per_run_ratio']}; target ≥ "
        f"{TARGETS['ratio']}: {ok('ratio')}); by CPU seconds {result.get('cpu_ratio')} "
        f"(pipeline {o.get('cpu_seconds')} s, raw {raw.get('cpu_seconds')} s)",
        "",
    ]
