import io
import json

from memstream.cli.progress import Progress


def test_json_lines_report_each_task_at_most_every_interval_and_always_the_last_update():
    out = io.StringIO()
    with Progress(json_lines=True, every=3600, stream=out) as progress:
        progress.update("turns.v2", 1, 10, rate=5.0)
        progress.update("turns.v2", 5, 10)  # within the interval: not printed
        progress.update("facts.v2", 2, None)
        progress.update("turns.v2", 10, 10)  # done: always printed
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    assert lines == [
        {"progress": "turns.v2", "done": 1, "total": 10, "rate": 5.0},
        {"progress": "facts.v2", "done": 2, "total": None},
        {"progress": "turns.v2", "done": 10, "total": 10},
    ]


def test_without_json_and_without_a_terminal_nothing_is_printed():
    out = io.StringIO()
    with Progress(json_lines=False, stream=out) as progress:
        progress.update("import", 3, 4)
    assert out.getvalue() == ""
