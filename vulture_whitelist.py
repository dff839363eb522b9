"""Names vulture (``make lint``, [tool.vulture] in pyproject.toml) reports as unused that are used
by name only, each group with why. Anything else it reports is dead: remove it, do not list it."""

# ruff: noqa
_: object

# -- called by another program through a name it knows ----------------------------------------
_.save_config  # Hermes MemoryProvider hooks (hermes-contract.md): Hermes calls them
_.backup_paths
provider_config  # the argument of Hermes' get_status_config hook (provider, plugin shim)
glyph  # a field of Hermes' RecallStatus, which the stand-in copies (provider/_base.py)
ToolUsageProjection  # examples: registered through the memstream.projections entry point
agent_main  # bench/chaos/agent.py: run in a child process by a `python -c` string
_close_all  # producers/writer.py: an atexit hook
death_penalty_class  # bench/queries.py: rq's SimpleWorker reads these overrides
_._install_signal_handlers
_.should_exit  # uvicorn's Server reads it to stop (service/http.py)
_.__class__  # producers/connect.py: the client's class swapped in place

# -- attributes a library reads, set on its objects ------------------------------------------
_.caption_justify  # rich Table (cli/top.py)
_.caption_style
_.intra_op_num_threads  # onnxruntime SessionOptions (projections/embedders/onnx.py)
_.enable_cpu_mem_arena  # onnxruntime SessionOptions (projections/embedders/onnx.py)
_.inter_op_num_threads
_.execution_mode
_.graph_optimization_level
_.log_severity_level
_.row_factory  # sqlite3 connection (tests)
_.suppress_status_output  # Hermes AIAgent (tests/hermes/hermes_drive_agent.py)

# -- fields read by name: msgspec Structs, dataclasses read through getattr, Protocols --------
is_bot  # producers/events.py: a field of the frozen event contract (decoded from the wire)
logged_s  # bench/fleet/measure.py: read through getattr by its report
_.logged_s
repl  # text/redaction.py: the parameter name of re.Pattern.subn, which the Protocol mirrors
queued_ms  # query/protocol.py: a field of every answer, encoded for the asker (read from the JSON)
_.queued_ms
took_ms  # query/protocol.py: a field of every answer the server fills in, read by the asker from the JSON
_.took_ms

# -- http.server / socketserver hooks in the tests' fake servers ------------------------------
_.do_GET
_.do_POST
_.log_message
_.handle_error
_.close_connection
daemon_threads
_.daemon_threads
protocol_version
disable_nagle_algorithm

# -- pytest: module marks, hooks and fixtures pytest finds by name ----------------------------
pytestmark
pytest_collection_modifyitems
pytest_terminal_summary
pytest_plugins  # a plugin a test module loads (tests/test_resource_warnings.py: pytester)
_ctrl_c_as_on_a_terminal  # autouse fixtures (tests/conftest.py)
_isolated_env
_structlog_defaults
_pipelines_stopped
_garbage_collected
_own_tempdir  # autouse (tests/bench/test_bench_fleet.py)
c_time_locale  # a fixture requested by name (tests/projections/test_turns.py)
