"""How memstream starts its background threads (the shipper, the recall thread, the query
client's reader), and who may decide it.

A host that keeps per-task state in context variables (Hermes 0.2x: the profile's
``HERMES_HOME`` and its secrets) wants every background thread of a provider started
through its helper, so that the thread runs in the context of the code that started it.
The provider installs that helper (``use``); without one a thread is a plain
``threading.Thread``, as before.

Guarantees: ``spawn`` returns an unstarted thread running ``target`` and never raises
because of the installed helper (a failing helper falls back to a plain thread); one
helper per process (``use`` replaces the former one).
"""

from __future__ import annotations

import os
import threading
from typing import Any, Callable, Protocol

__all__ = ["Spawner", "spawn", "use", "current", "lower_priority"]


class Spawner(Protocol):
    """Hermes's ``spawn_context_thread`` signature: an unstarted thread."""

    def __call__(self, target: Callable[..., Any], *, name: str, daemon: bool = True) -> threading.Thread: ...


_spawner: Spawner | None = None


def use(spawner: Spawner | None) -> None:
    """Start background threads through ``spawner`` from now on (None: plain threads)."""
    global _spawner
    _spawner = spawner


def current() -> Spawner | None:
    return _spawner


def spawn(target: Callable[[], Any], *, name: str, daemon: bool = True) -> threading.Thread:
    """An unstarted thread running ``target``, made by the installed helper if any."""
    spawner = _spawner
    if spawner is not None:
        try:
            thread = spawner(target, name=name, daemon=daemon)
            if isinstance(thread, threading.Thread):
                return thread
        except Exception:  # a host's helper must not cost memstream its thread
            pass
    return threading.Thread(target=target, name=name, daemon=daemon)


def lower_priority(levels: int) -> bool:
    """Lower the calling thread's CPU priority by ``levels`` nice levels (Linux, where a
    thread has its own); whether it did. Never raises: a system without it leaves it as is."""
    try:
        tid = threading.get_native_id()
        os.setpriority(os.PRIO_PROCESS, tid, min(19, os.getpriority(os.PRIO_PROCESS, tid) + levels))
    except (AttributeError, OSError):
        return False
    return True
