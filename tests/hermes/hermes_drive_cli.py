"""Drive the real interactive ``HermesCLI``: chat, ``/new --yes``, chat, exit cleanup.

Run with the Hermes venv's Python; argv[1]: JSON {"prompts": [first, second]}. The model
comes from $HERMES_HOME/config.yaml. Prints ``MEMSTREAM_DRIVER_RESULT <json>``.
"""

import json
import os
import sys

import structlog

spec = json.loads(sys.argv[1])
# The provider's structured logs (warnings, hook failures) go to a file the test reads;
# inside Hermes, stdout may be redirected while the agent runs.
structlog.configure(
    processors=[
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso"),
        structlog.processors.format_exc_info,
        structlog.processors.JSONRenderer(),
    ],
    logger_factory=structlog.PrintLoggerFactory(open(os.environ["MEMSTREAM_TEST_LOG"], "a", buffering=1)),
)

import cli as hermes_cli  # noqa: E402  (Hermes's cli.py)

c = hermes_cli.HermesCLI()
out = {"replies": []}
out["replies"].append(c.chat(spec["prompts"][0]))
agent = c.agent
manager = getattr(agent, "_memory_manager", None)
out["providers"] = [p.name for p in manager.providers] if manager is not None else []
out["first_session_id"] = agent.session_id if agent is not None else None
c.process_command("/new --yes")  # --yes skips the confirmation modal
out["replies"].append(c.chat(spec["prompts"][1]))
out["second_session_id"] = c.agent.session_id if c.agent is not None else None
out["same_agent"] = c.agent is agent
hermes_cli._run_cleanup()  # what the CLI runs at exit: flush, on_session_end, shutdown
print("MEMSTREAM_DRIVER_RESULT " + json.dumps(out, default=str), flush=True)
