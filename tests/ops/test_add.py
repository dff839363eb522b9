"""``memstream add``'s text: read within the bound, clipped as the writer clips it, and a
memory write of the CLI's origin."""

from __future__ import annotations

import io

import pytest

from memstream.core import Settings
from memstream.ops import CommandError, memory_event, source_text


@pytest.fixture
def settings(tmp_path) -> Settings:
    return Settings.load(home=str(tmp_path / "ms-home"), autostart=False, max_text_bytes=1000)


def test_the_text_comes_from_the_file_then_stdin_for_a_dash_then_the_argument(tmp_path):
    note = tmp_path / "note.txt"
    note.write_text("from the file\n", encoding="utf-8")
    stdin = io.BytesIO(b"from stdin\n")
    assert source_text(100, text=None, file=str(note), stdin=stdin) == ("from the file\n", str(note), False)
    assert source_text(100, text="-", file=None, stdin=stdin) == ("from stdin\n", "stdin", False)
    assert source_text(100, text="as given", file=None, stdin=stdin) == ("as given", "TEXT", False)
    assert source_text(3, text="four", file=None, stdin=None) == ("four", "TEXT", True)


def test_reading_stops_at_the_bound_and_keeps_a_character_whole():
    got = source_text(5, text="-", file=None, stdin=io.BytesIO("abcdé and more".encode()))
    assert got == ("abcd", "stdin", True)  # é's first byte is the fifth: it is not split


@pytest.mark.parametrize(
    "kwargs, says",
    [
        ({"text": "-", "file": None, "stdin": None}, "`add -` reads the text from stdin, and there is no stdin"),
        ({"text": None, "file": None, "stdin": None}, "nothing to add: give TEXT"),
        ({"text": "-", "file": None, "stdin": io.BytesIO(b"\xff")}, "stdin is not UTF-8 text (invalid byte at offset 0)"),
        ({"text": None, "file": "a\0b", "stdin": None}, "is not a valid path"),
    ],
)
def test_a_text_that_cannot_be_had_is_a_command_error_saying_why(kwargs, says):
    with pytest.raises(CommandError, match=says.replace("(", r"\(").replace(")", r"\)")):
        source_text(100, **kwargs)


def test_the_memory_write_drops_a_files_final_newline_and_is_of_the_clis_origin(settings):
    event, clipped = memory_event(
        settings, "prefers green tea\n", "note.txt", False, tenant=None, agent="a1", session=None, target="user"
    )
    assert (event.content, clipped, event.target, event.action, event.origin) == (
        "prefers green tea",
        False,
        "user",
        "add",
        "memstream-cli",
    )
    assert (event.scope.tenant, event.scope.agent, event.scope.session_id, event.scope.platform) == (
        settings.tenant,
        "a1",
        "",
        "cli",
    )
    kept, _ = memory_event(settings, "as typed\n", "TEXT", False, tenant="t9", agent="a1", session="s1", target="memory")
    assert kept.content == "as typed\n" and kept.scope.tenant == "t9" and kept.scope.session_id == "s1"


def test_a_text_read_only_up_to_the_bound_is_clipped_as_the_writer_clips_the_whole(settings):
    whole = "é" * 5000  # 10000 bytes
    read = whole.encode()[:1000].decode()
    event, clipped = memory_event(settings, read, "stdin", True, tenant=None, agent="a1", session=None, target="memory")
    from_whole, also_clipped = memory_event(settings, whole, "TEXT", True, tenant=None, agent="a1", session=None, target="memory")
    assert clipped and also_clipped and event.clipped == ["content"]
    assert event.content == from_whole.content and len(event.content.encode()) <= 1000


def test_an_empty_text_is_nothing_to_add(settings):
    with pytest.raises(CommandError, match=r"nothing to add: the text \(stdin\) is empty"):
        memory_event(settings, " \n", "stdin", False, tenant=None, agent="a1", session=None, target="memory")
