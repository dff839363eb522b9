"""Bad input at the hooks: coerced, clipped or rejected, always counted, never raised,
and nothing else is lost."""

from __future__ import annotations

import pytest
from provider_support import harness  # noqa: F401  (fixture)

from memstream.producers.events import MemoryWritten, TurnRecorded
from memstream.text.clean import CLIPPED_MARK, clean_text

TEN_MB = 10 * 1024 * 1024


def of(kind, events):
    return [e for e in events if isinstance(e, kind)]


# -- clean_text, the one place text from outside is cleaned ---------------------------------


@pytest.mark.parametrize("text", ["a" * 5000, "é" * 5000, "日本" * 3000, "a" * 99 + "€" * 10])
def test_clean_text_never_returns_more_than_max_bytes(text):
    for max_bytes in (100, 101, 102, 1000):
        out, problems = clean_text(text, max_bytes)
        assert len(out.encode("utf-8")) <= max_bytes, (max_bytes, len(out.encode()))
        if len(text.encode("utf-8")) > max_bytes:
            assert out.endswith(CLIPPED_MARK) and problems == ["clipped"]
        else:
            assert (out, problems) == (text, [])


def test_clean_text_keeps_text_within_the_bound_untouched():
    assert clean_text("héllo", 6) == ("héllo", [])
    assert clean_text("hello", 5) == ("hello", [])
    assert clean_text(None, 5) == ("", [])


def test_clean_text_replaces_lone_surrogates_and_says_so():
    out, problems = clean_text("a\ud800b\udfffc", 100)
    out.encode("utf-8")  # valid now
    assert out == "a?b?c" and problems == ["invalid surrogates replaced"]


def test_clean_text_coerces_other_types_and_survives_unprintable_objects():
    class Unprintable:
        def __str__(self):
            raise ValueError("no")

    assert clean_text(42, 10) == ("42", ["not a string (int)"])
    assert clean_text(Unprintable(), 10) == ("", ["not a string (Unprintable)", "unprintable"])


# -- through the hooks -----------------------------------------------------------------------


def test_none_content_becomes_empty_text_without_complaint(harness):
    p = harness.provider()
    p.sync_turn(None, None)
    p.on_memory_write("add", "memory", None)
    events = harness.events()
    assert (of(TurnRecorded, events)[0].user_text, of(MemoryWritten, events)[0].content) == ("", "")
    assert "coerced" not in p.stats()


def test_non_string_content_is_converted_and_counted(harness):
    p = harness.provider()
    p.sync_turn(42, {"answer": 1})
    p.on_memory_write("add", "memory", ["a", "list"])
    p.on_delegation(None, 3.5)
    events = harness.events()
    turn = of(TurnRecorded, events)[0]
    assert (turn.user_text, turn.assistant_text) == ("42", "{'answer': 1}")
    assert of(MemoryWritten, events)[0].content == "['a', 'list']"
    assert p.stats()["coerced"] == 4


def test_ten_megabytes_of_content_is_clipped_flagged_and_counted(harness, settings):
    p = harness.provider()
    p.sync_turn("u" * TEN_MB, "é" * (TEN_MB // 2))
    p.on_memory_write("add", "user", "m" * TEN_MB, {"old_text": "o" * TEN_MB})
    p.on_memory_write("add", "user", "small")
    events = harness.events()
    turn = of(TurnRecorded, events)[0]
    writes = of(MemoryWritten, events)
    assert turn.clipped == ["user_text", "assistant_text"]
    assert writes[0].clipped == ["content", "old_text"] and writes[1].clipped == []
    for text in (turn.user_text, turn.assistant_text, writes[0].content, writes[0].old_text):
        assert text.endswith(CLIPPED_MARK)
        assert len(text.encode("utf-8")) <= settings.max_text_bytes
    assert turn.user_text.startswith("uuuu")
    assert p.stats()["clipped"] == 4


def test_the_clip_bound_follows_configuration(harness, monkeypatch):
    monkeypatch.setenv("MEMSTREAM_MAX_TEXT_BYTES", "64")
    p = harness.provider()
    p.on_memory_write("add", "memory", "x" * 65)
    p.on_memory_write("add", "memory", "y" * 64)
    writes = of(MemoryWritten, harness.events())
    assert [len(w.content.encode()) <= 64 for w in writes] == [True, True]
    assert [w.clipped for w in writes] == [["content"], []]


def test_invalid_surrogates_are_replaced_counted_and_the_event_still_arrives(harness):
    p = harness.provider()
    p.sync_turn("bad \ud800 user", "bad \udfff answer")
    p.on_memory_write("replace", "memory", "new \udc80", {"old_text": "old \ud83d"})
    events = harness.events()
    turn = of(TurnRecorded, events)[0]
    write = of(MemoryWritten, events)[0]
    assert (turn.user_text, turn.assistant_text) == ("bad ? user", "bad ? answer")
    assert (write.content, write.old_text) == ("new ?", "old ?")
    assert p.stats()["coerced"] == 4
    assert p.stats().get("encode_errors", 0) == 0


def test_surrogates_in_the_transcript_s_tool_calls_do_not_lose_the_turn(harness):
    p = harness.provider()
    messages = [
        {"role": "user", "content": "read the binary"},
        {"role": "assistant", "tool_calls": [{"id": "c1", "function": {"name": "read_file", "arguments": '{"p": "\udcff"}'}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "bytes \udc80\udc81 decoded with surrogateescape"},
        {"role": "assistant", "content": "done"},
    ]
    p.sync_turn("read the binary", "done", messages=messages)
    [turn] = of(TurnRecorded, harness.events())
    [c] = turn.tool_calls
    assert (c.name, c.call_id) == ("read_file", "c1")
    assert "\udcff" not in c.arguments and "surrogateescape" in c.result
    assert p.stats().get("encode_errors", 0) == 0


def test_a_malformed_transcript_does_not_lose_the_turn(harness):
    p = harness.provider()
    messages = [
        "not a message",
        None,
        42,
        {"role": "user", "content": [{"type": "text", "text": "look"}, {"type": "image_url"}, "junk"]},
        {"role": "assistant", "tool_calls": ["junk", {"id": "c1"}, {"function": None}]},
        {"role": "tool", "tool_call_id": None, "content": None},
        {"role": "tool", "tool_call_id": "c1", "content": "x" * 100_000},
        {"role": "assistant", "content": "ok"},
    ]
    p.sync_turn("look ", "ok", messages=messages)
    [turn] = of(TurnRecorded, harness.events())
    assert [c.name for c in turn.tool_calls] == ["?", "?"]
    assert len(turn.tool_calls[0].result) <= 1001  # clipped to a brief
    assert "hook_errors" not in p.stats()


@pytest.mark.parametrize(
    ("action", "target"),
    [
        ("append", "memory"),
        ("add", "notes"),
        (None, "memory"),
        ("add", None),
        (["add"], "memory"),
        ("ADD", "memory"),
    ],
)
def test_an_unknown_action_or_target_is_rejected_counted_and_nothing_else_is_lost(harness, action, target):
    p = harness.provider()
    p.on_memory_write("add", "memory", "before")
    p.on_memory_write(action, target, "rejected")
    p.on_memory_write("remove", "user", "", {"old_text": "after"})
    writes = of(MemoryWritten, harness.events())
    assert [(w.action, w.content, w.old_text) for w in writes] == [("add", "before", ""), ("remove", "", "after")]
    stats = p.stats()
    assert stats["rejected"] == 1 and "hook_errors" not in stats


def test_a_malformed_spool_record_is_quarantined_counted_and_the_rest_ships(harness):
    p = harness.provider()
    p.on_memory_write("add", "memory", "first")
    assert p.writer.spool.append(b"\xc1 not an event")  # e.g. a record from a broken producer
    p.on_memory_write("add", "memory", "second")
    writes = of(MemoryWritten, harness.events())
    assert [w.content for w in writes] == ["first", "second"]
    stats = p.stats()
    assert stats["malformed"] == 1 and stats["spool_corrupt"] == 1
    assert len(list(p.writer.spool.quarantine.glob("*.bad"))) == 1


def test_odd_arguments_to_session_hooks_are_tolerated(harness):
    p = harness.provider("s1")
    p.on_session_switch(None, parent_session_id=None, reset=None)
    p.on_session_end("not a list")
    p.on_session_end(None)  # same state as above: not repeated
    events = harness.events()
    assert [type(e).__name__ for e in events] == ["SessionSwitched", "SessionEnded"]
    assert events[0].scope.session_id == "s1" and events[1].message_count == 0
    assert "hook_errors" not in p.stats()


def test_a_full_spool_refuses_events_counts_them_and_no_hook_raises(monkeypatch, event_log):
    from writepath import Switchable, logged_contents

    from memstream.producers import writer as writer_module
    from memstream.provider.provider import MemstreamProvider

    link = Switchable(event_log, down=True)
    monkeypatch.setattr(writer_module, "LogLocator", lambda settings: link)
    monkeypatch.setenv("MEMSTREAM_SPOOL_MAX_BYTES", "4000")
    p = MemstreamProvider()
    p.initialize("s1", platform="cli")
    try:
        for i in range(100):
            p.on_memory_write("add", "memory", f"fact {i}")
        stats = p.stats()
        accepted = stats["spool_appended"]
        assert 0 < accepted < 100
        assert stats["refused"] == stats["spool_refused"] == 100 - accepted
        assert stats["spool_unshipped_bytes"] <= 4000
        assert "hook_errors" not in stats
        link.down = False  # the log is back: what was accepted ships, and room is made
        assert p.writer.flush(10)
        assert logged_contents(event_log) == [f"fact {i}" for i in range(accepted)]
        p.on_memory_write("add", "memory", "after")
        assert p.writer.flush(10)
        assert logged_contents(event_log)[-1] == "after"
    finally:
        p.shutdown()
