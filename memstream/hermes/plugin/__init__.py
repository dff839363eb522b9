"""memstream: the Hermes Agent memory provider plugin (a shim).

Installed into ``$HERMES_HOME/plugins/memstream/`` by ``memstream install-hermes``.
Hermes discovers this directory because this text names ``MemoryProvider`` and
``register_memory_provider``; it imports the module and calls ``register(ctx)``,
which calls ``ctx.register_memory_provider(MemstreamProvider())``.

The provider itself lives in the ``memstream`` distribution (package ``memstream.provider``),
which must be installed into the Python environment that runs Hermes:

    /path/to/hermes-venv/bin/pip install memstream

If it is not, Hermes would silently fall back to its built-in memory; this shim says
so on stderr and in the log before re-raising.
"""

import logging
import sys

try:
    from memstream.provider import MemstreamProvider, register  # noqa: F401  (the MemoryProvider)
except ImportError as _exc:  # pragma: no cover - depends on the interpreter
    _msg = (f"memstream plugin: cannot import the memstream provider ({_exc}); Hermes runs "
            f"without it. Install memstream into this Python: {sys.executable} -m pip install memstream")
    logging.getLogger("memstream").error(_msg)
    print(_msg, file=sys.stderr)
    raise

__all__ = ["MemstreamProvider", "register"]
