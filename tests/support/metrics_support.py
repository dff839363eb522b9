"""Helpers of the metrics tests: scrape a process's metrics and read figures out of them."""

from __future__ import annotations

import urllib.request
from contextlib import contextmanager

from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from memstream.core import observe


def scrape(metrics) -> str:
    """The exposition text of ``metrics`` (a ``memstream.service.Metrics``): over HTTP when
    it serves, else straight from its registry."""
    if metrics.url:
        with urllib.request.urlopen(metrics.url, timeout=10) as reply:
            return reply.read().decode()
    return generate_latest(metrics.registry).decode()


def families(text: str) -> dict:
    """Family name (a counter's with ``_total``) -> the parsed family."""
    out = {}
    for family in text_string_to_metric_families(text):
        name = family.name + "_total" if family.type == "counter" else family.name
        out[name] = family
    return out


def samples(text: str, name: str, **labels) -> list:
    """The samples called ``name`` whose labels include ``labels``."""
    return [
        s
        for f in text_string_to_metric_families(text)
        for s in f.samples
        if s.name == name and all(s.labels.get(k) == v for k, v in labels.items())
    ]


def value(text: str, name: str, **labels) -> float | None:
    """The one sample called ``name`` with ``labels`` (None: absent); fails on several."""
    found = samples(text, name, **labels)
    assert len(found) <= 1, f"{name}{labels}: {len(found)} samples"
    return found[0].value if found else None


class Recorder:
    """An observer (``memstream.core.observe``) that keeps every report."""

    def __init__(self) -> None:
        self.batches: list[tuple] = []
        self.embeds: list[tuple] = []
        self.answers: list[tuple] = []
        self.embed_dead: list[tuple] = []

    def batch(self, group, stages, applied, at):
        self.batches.append((group, dict(stages), list(applied), at))

    def embedded(self, group, texts, seconds):
        self.embeds.append((group, texts, seconds))

    def answered(self, op, seconds):
        self.answers.append((op, seconds))

    def embed_dead_lettered(self, group, entries):
        self.embed_dead.append((group, entries))


@contextmanager
def observing(observer):
    """``observer`` is the process's for the ``with`` block."""
    former = observe.install(observer)
    try:
        yield observer
    finally:
        observe.install(former)
