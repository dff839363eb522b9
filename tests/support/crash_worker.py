"""A pipeline worker process for the crash tests (run as ``python crash_worker.py``).

Usage: ``crash_worker.py URL HOME MODE``. ``MODE`` is ``stall`` or ``run``.

``stall``: the turns projection writes its points one by one; after ``STALL_AFTER``
points it sets ``test:stalled`` in Redis and blocks forever, in the middle of a batch
(some points written, the batch not acked), waiting to be SIGKILLed.
``run``: the plain pipeline with the same consumer name, until SIGTERM.
"""

from __future__ import annotations

import signal
import sys
import threading
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

import redis  # noqa: E402
from pipeline_support import make_pipeline  # noqa: E402

from memstream.producers.stream import EventLog  # noqa: E402

STALL_AFTER = 70


def main() -> None:
    url, home, mode = sys.argv[1:4]
    client = redis.Redis.from_url(url)
    log = EventLog(client, "memstream")
    pipeline = make_pipeline(Path(home), log, consumer="worker-1", batch=50)
    if mode == "stall":
        turns = pipeline.projection("turns")
        store_upsert = pipeline.store.upsert
        written = 0

        def upsert(collection, points):
            nonlocal written
            if not collection.startswith("turns"):
                return store_upsert(collection, points)
            for p in points:
                store_upsert(collection, [p])
                written += 1
                if written == STALL_AFTER:
                    client.set("test:stalled", written)
                    threading.Event().wait()  # stuck mid-batch until killed

        turns.store = type(
            "Stalling", (), {"__getattr__": lambda _, n: getattr(pipeline.store, n), "upsert": staticmethod(upsert)}
        )()
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    pipeline.start()
    client.set(f"test:started:{mode}", 1)
    stop.wait()
    pipeline.stop()


if __name__ == "__main__":
    main()
