"""``memstream up`` and ``down``: the service of ``MEMSTREAM_HOME``, in the foreground or
the background. What they return shows the log's URL with its password masked (the run
file keeps it)."""

from __future__ import annotations

from typing import Any

from memstream.core import Settings, mask_url

__all__ = ["start_foreground", "stop_service", "up_detached"]


def _masked(info: dict) -> dict:
    return {**info, "url": mask_url(str(info.get("url", "")))}


def up_detached(settings: Settings, env: dict[str, str] | None = None) -> dict:
    """Start the service in the background (``env``: variables of its environment, the
    command line's settings) and return its run-file info once it serves and its consumers
    wrote their first health record (``already_running`` when one served already).
    ``CommandError`` with the child's last error line when it exits first or does not say
    ready in time."""
    from memstream.ops.errors import CommandError
    from memstream.service import detach

    try:
        return _masked(detach(settings, env=env))
    except (RuntimeError, OSError) as exc:
        raise CommandError(str(exc)) from exc


def start_foreground(settings: Settings) -> tuple[Any, dict]:
    """(the started ``memstream.service.Service``, its run-file info) for its caller to
    serve; (None, the running one's info with ``already_running``) when another service
    holds this home. A Ctrl-C while starting stops what did start, then goes on up."""
    from memstream.service import AlreadyRunning, Service

    service = Service(settings)
    try:
        info = service.start()
    except AlreadyRunning as exc:
        return None, {**_masked(exc.info), "already_running": True}
    except KeyboardInterrupt:
        service.close()
        raise
    return service, _masked(info)


def stop_service(settings: Settings) -> tuple[dict, bool]:
    """Stop the background service: (what ``memstream.service.stop_service`` found, whether
    the command succeeded: it stopped, or none was running: ``Stopped.ok``)."""
    from memstream.service import stop_service as stop

    result = stop(settings)
    return result.as_dict(), result.ok
