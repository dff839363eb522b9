"""cli: the ``memstream`` command line (console script ``memstream = "memstream.cli:main"``,
``python -m memstream``): argument types and bounds (``args``), what it prints and its exit
codes (``output``), and the parser, ``main`` and the commands (``commands``), which call
``memstream.ops`` for the work."""

from memstream.cli.commands import build_parser, main

__all__ = ["build_parser", "main"]
