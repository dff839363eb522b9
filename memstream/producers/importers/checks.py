"""What every importer shares: the error that rejects a file, and the check that an event
would be admitted by every projection (``memstream.workers.admission``) before anything of
its file is appended."""

from __future__ import annotations

from memstream.core import MAX_ID_BYTES, PermanentError
from memstream.producers.events import Event, encode

__all__ = ["ImportFileError", "check_event"]

# The bound admission puts on the event id and the scope's identifiers (UTF-8 bytes):
_SCOPE_IDS = ("tenant", "app", "agent", "user_id", "session_id", "run_id", "platform")


class ImportFileError(PermanentError, ValueError):
    """A file that cannot be imported: ``path``, ``where`` in it (a line, a table and row)
    and why. Nothing of the file is appended."""

    def __init__(self, path: str, where: str, reason: str) -> None:
        self.path, self.where, self.reason = path, where, reason
        super().__init__(f"{path}: {where}: {reason}" if where else f"{path}: {reason}")


def check_event(event: Event) -> None:
    """``ValueError`` (the reason) when admission would dead-letter ``event``: an empty or
    oversized id, an empty tenant, an oversized scope identifier, or text that cannot be
    encoded."""
    if not event.id.strip():
        raise ValueError("the event id is empty")
    if len(event.id.encode("utf-8", "surrogatepass")) > MAX_ID_BYTES:
        raise ValueError(f"the event id is over {MAX_ID_BYTES} bytes")
    if not event.scope.tenant.strip():
        raise ValueError("scope.tenant is empty")
    for name in _SCOPE_IDS:
        if len(getattr(event.scope, name).encode("utf-8", "surrogatepass")) > MAX_ID_BYTES:
            raise ValueError(f"scope.{name} is over {MAX_ID_BYTES} bytes")
    try:
        encode(event)
    except (UnicodeEncodeError, TypeError, ValueError) as exc:  # e.g. a lone surrogate in a text
        raise ValueError(f"the event cannot be encoded ({exc})") from None
