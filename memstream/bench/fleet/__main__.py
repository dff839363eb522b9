"""``python -m memstream.bench.fleet --agent-process SPEC | --service-process``."""

import sys

from memstream.bench.fleet import main

sys.exit(main())
