"""memstream: the Hermes Agent memory provider plugin (a shim).

Installed into ``$HERMES_HOME/plugins/memstream/`` by ``memstream install-hermes``, and
found through the ``hermes_agent.memory_providers`` entry point wherever the memstream
distribution is installed in Hermes's environment (Hermes 0.21+). Hermes discovers this
directory because this text names ``MemoryProvider`` and ``register_memory_provider``;
it imports the module and calls ``register(ctx)``, which calls
``ctx.register_memory_provider(MemstreamProvider())``.

The provider itself lives in the ``memstream`` distribution (``memstream.provider``),
which must be in the Python environment that runs Hermes: ``plugin.yaml`` declares it,
so Hermes 0.21+ installs it (``hermes memory setup memstream``). Where it is missing this
shim registers a stand-in that Hermes reports as unavailable, with the reason and the
command that fixes it (``hermes memory status``, the start-up warning), and Hermes runs
with its built-in memory.
"""

import logging
import sys

try:
    from memstream.provider import MemstreamProvider, register  # noqa: F401  (the MemoryProvider)
except ImportError as _exc:  # pragma: no cover - depends on the interpreter
    from agent.memory_provider import MemoryProvider as _Base

    MISSING = (f"memstream is not installed in the Python that runs Hermes ({sys.executable}: {_exc}); "
               "Hermes uses its built-in memory. Fix: `hermes memory setup memstream` (Hermes 0.21+), or "
               "install memstream into that environment; `memstream doctor` checks it.")
    logging.getLogger("memstream").error(MISSING)
    print(MISSING, file=sys.stderr)

    class MemstreamProvider(_Base):  # the stand-in: found, never available
        @property
        def name(self):
            return "memstream"

        def is_available(self):
            return False

        def unavailable_reason(self):
            return MISSING

        def initialize(self, session_id, **kwargs):
            return None

        def get_tool_schemas(self):
            return []

        def get_status_config(self, provider_config=None):
            return {"problem": MISSING}

    def register(ctx):
        ctx.register_memory_provider(MemstreamProvider())

__all__ = ["MemstreamProvider", "register"]
