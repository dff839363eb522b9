"""The one error the operations raise for their caller to show."""

from __future__ import annotations

from memstream.core import PermanentError

__all__ = ["CommandError"]


class CommandError(PermanentError):
    """A command failed in a way the user can act on (message says how).

    Permanent: the command as given fails the same way again until the user acts."""
