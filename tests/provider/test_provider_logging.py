"""Inside Hermes nobody configures structlog for memstream: the provider's log lines go to
stdlib ``logging`` (logger ``memstream``), never to the agent's stdout. Each test runs a
fresh Python, without this test suite's structlog handling."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap


def run_python(code: str, tmp_path) -> subprocess.CompletedProcess:
    env = dict(
        os.environ,
        MEMSTREAM_HOME=str(tmp_path / "ms-home"),
        MEMSTREAM_AUTOSTART="0",
        MEMSTREAM_TENANT="t1",
        HERMES_HOME=str(tmp_path / "hermes-home"),
    )
    env.pop("MEMSTREAM_REDIS_URL", None)
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, env=env, timeout=60, check=False
    )
    assert proc.returncode == 0, proc.stderr
    return proc


def test_a_hook_warning_of_a_registered_provider_never_reaches_stdout(tmp_path):
    proc = run_python(
        """
        import structlog
        from memstream.provider import register

        assert not structlog.is_configured(), "importing the provider configured structlog"

        class Hermes:  # what Hermes hands the plugin's register()
            def register_memory_provider(self, provider):
                self.provider = provider

        hermes = Hermes()
        register(hermes)
        hermes.provider.on_memory_write("bogus", "memory", "x")  # warns: unknown action
        assert hermes.provider.stats()["rejected"] == 1
    """,
        tmp_path,
    )
    assert proc.stdout == ""
    # no logging configured in this process: Python's last resort prints warnings on stderr
    assert "provider.memory_write_rejected" in proc.stderr


def test_the_host_logging_configuration_decides_where_the_lines_go(tmp_path):
    proc = run_python(
        """
        import logging
        import sys

        from memstream.provider import MemstreamProvider

        logging.basicConfig(stream=sys.stderr, level=logging.WARNING, format="HOST %(name)s %(levelname)s %(message)s")
        logging.getLogger("memstream.provider").setLevel(logging.ERROR)
        p = MemstreamProvider()
        p.initialize("s1")  # the first initialize sets the routing up too
        p.on_memory_write("bogus", "memory", "x")  # a warning: below what the host wants
        logging.getLogger("memstream.provider").setLevel(logging.WARNING)
        p.sync_turn(42, "not text: coerced")  # warns: bad input
        p.shutdown()
    """,
        tmp_path,
    )
    assert proc.stdout == ""
    assert "memory_write_rejected" not in proc.stderr
    lines = [line for line in proc.stderr.splitlines() if "provider.bad_input" in line]
    assert len(lines) == 1 and lines[0].startswith("HOST memstream.provider WARNING event='provider.bad_input'")


def test_a_host_that_configured_structlog_keeps_its_configuration(tmp_path):
    proc = run_python(
        """
        import sys

        import structlog

        structlog.configure(processors=[structlog.processors.JSONRenderer()],
                            logger_factory=structlog.PrintLoggerFactory(sys.stderr))
        before = structlog.get_config()

        from memstream.provider import register

        class Hermes:
            def register_memory_provider(self, provider):
                self.provider = provider

        hermes = Hermes()
        register(hermes)
        hermes.provider.on_memory_write("bogus", "memory", "x")
        assert structlog.get_config() == before
    """,
        tmp_path,
    )
    assert proc.stdout == ""
    assert '"event": "provider.memory_write_rejected"' in proc.stderr
