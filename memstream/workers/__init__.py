"""workers: consumer-group workers that filter, redact, extract facts, embed and
project the log (``Pipeline``), and answer queries where the stores live."""
