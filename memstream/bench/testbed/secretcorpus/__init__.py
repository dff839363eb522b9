"""The labelled corpus of secret redaction: fake secrets written the ways people paste them,
and ordinary turns that must come back unchanged.

Every value is made up here, from a seeded generator, in the shape of its provider's format
(prefix, alphabet, length, sometimes one character shorter or longer than the canonical
length): none is a real credential. ``secrets(part)`` gives the labelled secrets of one part:
``tuned`` (the part the rules of ``memstream.text.redaction`` were tuned on) or ``heldout``
(other ways of writing them and other near-formats, with another seed, kept apart from the
tuning). ``ordinary()`` gives the ordinary turns: chat prose, technical prose that uses the
words key, token, secret and password innocently, code with git SHAs, UUIDs and hashes,
base64 images, URLs without credentials, logs, command lines (``-p 8080:80``, ``-u 1000:1000``),
configuration without secrets, and other scripts.

``leaked(out, secret)`` says whether a redacted text still holds the secret or a piece of it
(any 10 characters in a row, after removing zero-width characters and mapping look-alikes
to ASCII, so a secret split by a zero-width space or wrapped over two lines counts as kept
if either half survives).

``tests/text/corpus/make_corpus.py`` writes the corpus files the tests read;
``memstream bench redaction`` measures on the same texts.

The package: ``values`` (the generator of made-up values, the providers), ``named``,
``shapes`` and ``fourth`` (the ways secrets are written, draw by draw), ``labelled``
(``secrets``), ``ordinary`` (the turns that must not change), ``leaks`` (``leaked``).
"""

from memstream.bench.testbed.secretcorpus.labelled import secrets
from memstream.bench.testbed.secretcorpus.leaks import leaked, normalise
from memstream.bench.testbed.secretcorpus.ordinary import ordinary, ordinary_digests
from memstream.bench.testbed.secretcorpus.values import PARTS

__all__ = ["PARTS", "leaked", "normalise", "ordinary", "ordinary_digests", "secrets"]
