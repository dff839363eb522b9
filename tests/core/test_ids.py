"""Event ids: UUIDv7, unique, monotonic within a process across threads."""

from __future__ import annotations

import threading
import uuid

import pytest

from memstream.core import ids as ids_module
from memstream.core.ids import derived_event_id, event_id_time_ms, new_event_id


@pytest.fixture
def frozen_clock(monkeypatch):
    """Control the clock new_event_id reads; the id generator's state is restored after."""
    now = {"ms": 4_102_444_800_000}  # 2100-01-01, after any id of the real clock
    monkeypatch.setattr(ids_module, "_last_ms", 0)
    monkeypatch.setattr(ids_module, "_last_seq", 0)
    monkeypatch.setattr(ids_module.time, "time_ns", lambda: now["ms"] * 1_000_000)
    return now


def test_ids_are_rfc9562_version_7():
    value = uuid.UUID(new_event_id())
    assert value.version == 7
    assert value.variant == uuid.RFC_4122


def test_ids_made_by_many_threads_are_unique_and_increase_in_the_order_they_were_made():
    made: list[str] = []  # appended under the same lock that orders the ids
    lock = threading.Lock()

    def make(n: int) -> None:
        for _ in range(n):
            with lock:
                made.append(new_event_id())

    threads = [threading.Thread(target=make, args=(2000,)) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(made)) == len(made) == 8000
    assert made == sorted(made)
    assert [uuid.UUID(i).int for i in made] == sorted(uuid.UUID(i).int for i in made)


def test_ids_made_concurrently_without_coordination_are_unique_and_each_thread_sees_them_rise():
    per_thread: list[list[str]] = [[] for _ in range(4)]

    def make(out: list[str]) -> None:
        for _ in range(3000):
            out.append(new_event_id())

    threads = [threading.Thread(target=make, args=(out,)) for out in per_thread]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    every = [i for out in per_thread for i in out]
    assert len(set(every)) == len(every)
    for out in per_thread:
        assert out == sorted(out)


def test_the_time_in_an_id_is_the_clock_when_it_was_made(frozen_clock):
    assert event_id_time_ms(new_event_id()) == frozen_clock["ms"]
    frozen_clock["ms"] += 1234
    assert event_id_time_ms(new_event_id()) == frozen_clock["ms"]


def test_more_than_4096_ids_in_one_millisecond_still_increase(frozen_clock):
    made = [new_event_id() for _ in range(10_000)]
    assert made == sorted(made) and len(set(made)) == len(made)
    assert event_id_time_ms(made[0]) == frozen_clock["ms"]
    # borrowing from the next milliseconds stays close to the clock
    assert 0 < event_id_time_ms(made[-1]) - frozen_clock["ms"] <= 5


def test_ids_keep_increasing_when_the_wall_clock_steps_back(frozen_clock):
    first = new_event_id()
    frozen_clock["ms"] -= 60_000
    second = new_event_id()
    assert second > first
    assert event_id_time_ms(second) == event_id_time_ms(first)


def test_a_derived_id_is_a_uuid7_of_the_given_time_and_the_same_for_the_same_key():
    made = derived_event_id(1_790_000_000_123, "hermes", "turn", "acme", "s1", 3)
    value = uuid.UUID(made)
    assert (value.version, value.variant, str(value)) == (7, uuid.RFC_4122, made)
    assert event_id_time_ms(made) == 1_790_000_000_123
    assert derived_event_id(1_790_000_000_123, "hermes", "turn", "acme", "s1", 3) == made
    # the value is fixed across processes and releases: ids already in logs depend on it
    assert derived_event_id(0, "x") == "00000000-0000-790f-a836-cf6c28a21e4d"


def test_derived_ids_of_different_keys_differ_part_by_part_and_by_type():
    keys = [("a", "b"), ("ab",), ("a", "b", ""), (1,), ("1",), ("b", "a")]
    assert len({derived_event_id(5, *k) for k in keys}) == len(keys)
    assert derived_event_id(5, "a") != derived_event_id(6, "a")


def test_a_derived_id_clamps_its_time_to_the_48_bits_it_has_and_refuses_other_key_types():
    assert event_id_time_ms(derived_event_id(-5, "k")) == 0
    assert event_id_time_ms(derived_event_id(1 << 60, "k")) == (1 << 48) - 1
    for bad in ((), (1.5,), (True,), (None,)):
        with pytest.raises(ValueError):
            derived_event_id(0, *bad)
