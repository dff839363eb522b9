"""The chaos bench's table: ``format_chaos`` renders ``chaos_bench``'s dict."""

from __future__ import annotations

from typing import Any


def format_chaos(r: dict[str, Any]) -> str:
    ok = (
        r["lost"] == 0
        and r["duplicated"] == 0
        and r.get("foreign_changed", 0) == 0
        and r.get("hostile_tenant_breached", 0) == 0
        and not r["hostile_jobs_ran"]
        and r["poison_dead_lettered_by_every_projection"] == r["poison_injected"]
        and r["settled"]
        and r.get("spooled_at_end", 0) == 0
    )
    return "\n".join(
        [
            f"chaos, {r['minutes']} min, {r['agents']} agents at {r['rate_per_agent']} turns/s, seed {r['seed']}: "
            f"{'OK' if ok else 'FAILED'}",
            f"  actions: {', '.join(f'{k} {v}' for k, v in sorted(r['actions'].items()))}",
            f"  turns written {r['written']}, in the log {r['in_log']} ({r['distinct_in_log']} distinct), "
            f"turn points projected {r['projected_turn_points']}",
            f"  honest tenant: lost {r['lost']}, duplicated {r['duplicated']}, foreign-changed {r['foreign_changed']}, "
            f"settled {r['settled']}",
            f"  left in the agents' spools at the end (not in the log, not lost): {r.get('spooled_at_end', 0)} turns "
            f"(the final ship drained: {r.get('final_ship_drained')})",
            f"  hostile tenant: {r['hostile_tenant_done']} destructive commands on its own keys, "
            f"{r['hostile_tenant_refused']} on others' refused, {r['hostile_tenant_breached']} on others' ran",
            f"  poison: {r['poison_injected']} injected, {r['poison_dead_lettered_by_every_projection']} dead-lettered "
            f"by every projection (reasons present: {r['poison_reasons_present']}); oversized {r['oversized_injected']}",
            f"  hostile jobs ran: {r['hostile_jobs_ran']}",
            f"  sync_turn: {r['hook_calls']} calls, p50 {r['hook_p50_ms']} ms, p99 {r['hook_p99_ms']} ms, "
            f"max {r['hook_max_ms']} ms",
        ]
    )
