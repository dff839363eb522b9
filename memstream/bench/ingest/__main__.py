"""``python -m memstream.bench.ingest``: the ingest bench with its arguments, outside the
``memstream`` command."""

import argparse

from memstream.bench.ingest import add_arguments, run
from memstream.core import configure

parser = argparse.ArgumentParser(prog="python -m memstream.bench.ingest")
parser.add_argument("--json", action="store_true")
add_arguments(parser)
configure("WARNING")
raise SystemExit(run(parser.parse_args()))
