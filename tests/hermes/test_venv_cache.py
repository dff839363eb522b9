"""The cached Hermes venv under pytest-xdist: two workers that both find it out of date (a
changed pyproject.toml, another checkout's source) both get in, one after the other built it.
No Hermes is installed here: the build and the checks are stand-ins that count."""

from __future__ import annotations

import threading

import hermes_harness as harness


def test_two_workers_that_find_the_venv_out_of_date_both_get_in_once_one_built_it(tmp_path, monkeypatch):
    env = harness.HermesEnv("hermes-agent", "0.0.0", "test-")
    monkeypatch.setattr(harness, "CACHE", tmp_path)
    monkeypatch.setattr(harness, "LOCK_WAIT", 20.0)  # the old lock order waited this long, then failed
    built: list[str] = []
    first_look = threading.Barrier(2)  # both look before either builds: the race xdist's workers run
    seen: set[str] = set()

    def ready(_env, stamp_required: bool = True) -> bool:
        me = threading.current_thread().name
        if me not in seen:
            seen.add(me)
            first_look.wait(timeout=60)
        return bool(built)

    monkeypatch.setattr(harness, "_hermes_ready", ready)
    monkeypatch.setattr(harness, "_source_ready", lambda _env: bool(built))
    monkeypatch.setattr(harness, "_build", lambda _env: built.append(threading.current_thread().name))

    inside: list[str] = []
    both_inside = threading.Event()
    errors: list[BaseException] = []

    def worker() -> None:
        try:
            with harness.cached_venv(env):
                inside.append(threading.current_thread().name)
                if len(inside) == 2:
                    both_inside.set()
                # a session holds the shared lock until it ends: here, until the other is in too
                both_inside.wait(timeout=60)
        except BaseException as e:  # pytest.fail raises an OutcomeException (a BaseException)
            errors.append(e)
            both_inside.set()

    threads = [threading.Thread(target=worker, name=f"gw{i}") for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert errors == [], errors
    assert sorted(inside) == ["gw0", "gw1"]
    assert len(built) == 1, built  # built once
