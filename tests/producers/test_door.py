"""The one door into the log (memstream/producers/door.py): no code of the package appends
to a stream of the log another way, and every way in redacts and clips.

The rule is read from the code, not from a list of names: the functions of
producers/stream.py that run the append script (found by what they do: the attribute the
script is registered under, ``evalsha``, a string holding ``XADD``) and every function of
that module that calls them are the raw append; a use of any of their names outside the
door and stream.py fails, whatever they are called. So does an ``XADD`` anywhere else
(a ``.xadd`` call, a script or command string) but in the streams that are not the log
(named below, each with its key). ``memstream/bench`` is left out: benchmarks append raw
entries on purpose (malformed and hostile ones in ``bench chaos``, the naive baseline of
``bench hotpath``).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "memstream"
STREAM = PACKAGE / "producers" / "stream.py"
DOOR = PACKAGE / "producers" / "door.py"

# modules that may XADD, and to which stream: none of them is the log
OTHER_STREAMS = {
    "workers/deadletters.py": "P:dlq, the dead letters",
    "projections/vector.py": "P:embed:{group}, a projection version's dense backlog",
    "producers/acl.py": "ACL rules (+xadd), no append",
    "producers/tenants.py": "ACL rules (+xadd), no append",
}
_XADD = re.compile(r"\bxadd\b", re.IGNORECASE)


def _modules() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if "bench" not in p.relative_to(PACKAGE).parts)


def _functions(tree: ast.AST) -> dict[str, ast.FunctionDef | ast.AsyncFunctionDef]:
    return {n.name: n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}


def raw_append_names(source: str) -> set[str]:
    """The names of the functions of ``source`` (producers/stream.py) that append: those
    that call the append script (by the attribute its ``register_script`` result is kept
    under, by ``evalsha``, or by a module string that holds XADD), and, up to a fixed
    point, those that call them. Constructors are not appends."""
    tree = ast.parse(source)
    scripts = {
        t.id
        for n in ast.walk(tree)
        if isinstance(n, ast.Assign) and isinstance(n.value, ast.Constant) and isinstance(n.value.value, str)
        if _XADD.search(n.value.value)
        for t in n.targets
        if isinstance(t, ast.Name)
    }
    registered = {
        t.attr
        for n in ast.walk(tree)
        if isinstance(n, ast.Assign) and isinstance(n.value, ast.Call) and isinstance(n.value.func, ast.Attribute)
        if n.value.func.attr == "register_script"
        for t in n.targets
        if isinstance(t, ast.Attribute)
    }
    functions = {name: f for name, f in _functions(tree).items() if not (name.startswith("__") and name.endswith("__"))}

    def uses(f: ast.AST, names: set[str]) -> bool:
        for n in ast.walk(f):
            if isinstance(n, ast.Attribute) and n.attr in names:
                return True
            if isinstance(n, ast.Name) and n.id in names:
                return True
        return False

    found = {name for name, f in functions.items() if uses(f, registered | {"evalsha", "xadd"} | scripts)}
    while True:
        more = {name for name, f in functions.items() if name not in found and uses(f, found)}
        if not more:
            return found
        found |= more


def door_violations(path: Path, source: str, raw: set[str]) -> list[str]:
    """Where ``source`` (the module at ``path``) appends to a stream other than through the door."""
    rel = path.relative_to(PACKAGE).as_posix()
    if path in (STREAM, DOOR):
        return []
    out = []
    for node in ast.walk(ast.parse(source)):
        line = getattr(node, "lineno", 0)
        if isinstance(node, ast.Attribute) and node.attr in raw:
            out.append(f"{rel}:{line}: .{node.attr} (the raw append) outside the door")
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in raw:
            out.append(f"{rel}:{line}: {node.value!r} (the raw append's name) outside the door")
        elif rel not in OTHER_STREAMS and isinstance(node, ast.Attribute) and _XADD.fullmatch(node.attr):
            out.append(f"{rel}:{line}: .{node.attr}: an append to a stream outside the door")
        elif rel not in OTHER_STREAMS and isinstance(node, ast.Constant) and isinstance(node.value, str):
            if _XADD.search(node.value):
                out.append(f"{rel}:{line}: a string with XADD (a script or command) outside the door")
    return out


def test_the_raw_append_is_found_by_what_it_does():
    raw = raw_append_names(STREAM.read_text(encoding="utf-8"))
    assert "append_batch" in raw  # today's name of the raw append: found by its script call
    assert "append" not in raw  # EventLog.append goes through the door


def test_no_code_of_the_package_appends_to_the_log_but_through_the_door():
    raw = raw_append_names(STREAM.read_text(encoding="utf-8"))
    problems = [p for path in _modules() for p in door_violations(path, path.read_text(encoding="utf-8"), raw)]
    assert problems == []


@pytest.mark.parametrize(
    "code",
    [
        "def ship(log, records):\n    return log.append_batch(records)\n",
        "def ship(log, records):\n    send = log.append_batch\n    return send(records)\n",
        "def ship(log, records):\n    return getattr(log, 'append_batch')(records)\n",
        "def ship(client, key, data):\n    client.xadd(key, data)\n",
        "def ship(client, key, data):\n    client.execute_command('XADD', key, '*', 'data', data)\n",
        "SCRIPT = \"return redis.call('xadd', KEYS[1], '*', 'data', ARGV[1])\"\n",
    ],
)
def test_an_append_outside_the_door_is_found(code):
    raw = raw_append_names(STREAM.read_text(encoding="utf-8"))
    assert door_violations(PACKAGE / "ops" / "example.py", code, raw)


def test_a_renamed_raw_append_is_still_the_raw_append():
    source = STREAM.read_text(encoding="utf-8").replace("append_batch", "put_records").replace("_script", "_lua")
    raw = raw_append_names(source)
    assert "put_records" in raw and "append_batch" not in raw
    assert door_violations(PACKAGE / "ops" / "example.py", "def f(log, r):\n    log.put_records(r)\n", raw)


def test_an_event_through_the_door_keeps_its_bytes_when_nothing_changes_and_is_redacted_before_it_is_clipped():
    from writepath import remembered

    from memstream.producers.door import admit
    from memstream.producers.events import decode, encode

    plain = remembered("nothing secret here")
    data = encode(plain)
    assert admit(plain, seq=7, data=data).record.data is data  # the spool's bytes, not re-encoded

    pasted = "ghp_Zq8xR2vB7nK4mW1pT6yH3cJ9dF5gL0sA2eUu"  # made up, in GitHub's format
    text = "x" * 90 + " " + pasted + " and more" * 20  # the bound falls inside the token
    got = admit(remembered(text), max_text_bytes=120)
    stored = decode(got.record.data)
    assert got.redacted == 1 and got.clipped == ("content",) and stored.clipped == ["content"]
    assert len(stored.content.encode()) <= 120
    assert pasted[:10] not in stored.content  # redacted whole first, so no half of it is kept
