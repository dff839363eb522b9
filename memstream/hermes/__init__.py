"""hermes: installing memstream's plugin into a Hermes home and checking that it is."""

from memstream.hermes.installer import check, hermes_home, install

__all__ = [
    "check",
    "hermes_home",
    "install",
]
