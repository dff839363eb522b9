from memstream import plain_structlog

plain_structlog()  # before the command line imports structlog (the service runs as `python -m memstream up`)

from memstream.cli import main  # noqa: E402  # after structlog was imported without its console extras

raise SystemExit(main())
