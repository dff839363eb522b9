"""Helpers of the tests of deploy/grafana: the dashboard's PromQL expressions, the metric and
label names each one uses (a scanner of PromQL's tokens: enough to find names, no parser),
and the expressions made concrete for a real Prometheus (Grafana's variables replaced)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DASHBOARD = ROOT / "deploy" / "grafana" / "dashboards" / "memstream.json"

# PromQL's words that look like names: binary operators, modifiers and the grouping keywords
KEYWORDS = frozenset(
    {"and", "or", "unless", "bool", "offset", "by", "without", "on", "ignoring", "group_left", "group_right", "inf", "nan"}
)
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`')
_GROUPING = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)")
_RANGE = re.compile(r"\[[^\]]*\]")
_SELECTOR = re.compile(r"(?<![\w:.$])([A-Za-z_:][\w:]*)\s*(\{[^}]*\})?(\s*\()?")
_MATCHER = re.compile(r"([A-Za-z_]\w*)\s*(?:=~|!~|!=|=)")
_VARIABLE = re.compile(r"\$\{?(\w+)\}?")
_INTERVALS = ("__rate_interval", "__interval", "__range")


@dataclass
class Uses:
    """What one expression names: each selector's metric with the labels its matchers name,
    and the labels of its grouping clauses (``by``, ``without``, ``on``, ...)."""

    selectors: list[tuple[str, frozenset[str]]] = field(default_factory=list)
    grouping: set[str] = field(default_factory=set)

    @property
    def metrics(self) -> set[str]:
        return {name for name, _ in self.selectors}


def scan(expr: str) -> Uses:
    """The metric and label names ``expr`` uses (functions, aggregations and keywords aside)."""
    text = _STRING.sub('""', expr)
    uses = Uses()
    for labels in _GROUPING.findall(text):
        uses.grouping.update(label.strip() for label in labels.split(",") if label.strip())
    text = _RANGE.sub("", _GROUPING.sub(" ", text))
    for name, matchers, call in _SELECTOR.findall(text):
        if call or name in KEYWORDS:
            continue  # a function or an aggregation, or an operator
        uses.selectors.append((name, frozenset(_MATCHER.findall(matchers))))
    return uses


def dashboard() -> dict:
    return json.loads(DASHBOARD.read_text())


def panels(board: dict) -> Iterator[dict]:
    """Every panel, those inside a collapsed row too."""
    for panel in board.get("panels", []):
        yield panel
        yield from panel.get("panels", [])


def expressions(board: dict) -> list[tuple[str, str]]:
    """(where, PromQL) of every panel's target, and the series selector of every query
    variable (``label_values(SELECTOR, LABEL)``)."""
    found = [
        (f"panel {panel['title']!r} {target['refId']}", target["expr"])
        for panel in panels(board)
        for target in panel.get("targets", [])
    ]
    found += [(f"variable {name}", selector) for name, selector, _ in variable_queries(board)]
    return found


def variable_queries(board: dict) -> list[tuple[str, str, str]]:
    """(variable, series selector, label) of every query variable."""
    out = []
    for variable in board.get("templating", {}).get("list", []):
        if variable.get("type") != "query":
            continue
        query = variable["query"] if isinstance(variable["query"], str) else variable["query"]["query"]
        m = re.fullmatch(r"label_values\((.+),\s*(\w+)\)", query.strip())
        assert m, f"variable {variable['name']}: {query!r} is not label_values(SELECTOR, LABEL)"
        out.append((variable["name"], m.group(1), m.group(2)))
    return out


def variables_used(expr: str) -> set[str]:
    """The dashboard variables ``expr`` names (Grafana's own intervals aside)."""
    return {name for name in _VARIABLE.findall(expr) if name not in _INTERVALS}


def concrete(expr: str, interval: str = "1m") -> str:
    """``expr`` as Grafana sends it with every variable at "All" (``.*``) and its interval
    variables at ``interval``."""
    return _VARIABLE.sub(lambda m: interval if m.group(1) in _INTERVALS else ".*", expr)
