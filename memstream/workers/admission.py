"""One check of every stream entry, the same for every projection, before any sees it.

Every entry is untrusted input. ``admit`` checks it once: a retry meant for another group
(``only_group``, compared as bytes) is skipped; every field name and the text fields
(``type``, ``id``, ``retry_of``) must be UTF-8, ``data`` must decode to an event whose tag
equals the ``type`` field (and whose id equals the ``id`` field, when present), and the
fields every projection keys its data by must be usable: a non-empty event id and
``scope.tenant``, and the event id and scope identifiers at most ``MAX_ID_BYTES`` UTF-8
bytes. Such entries are dead-lettered with the reason (their raw fields kept); text
fields over ``max_text_bytes`` are clipped as the producers clip them
(``memstream.producers.door.clip_event``) and named in the event's ``clipped``.
"""

from __future__ import annotations

from dataclasses import dataclass

from memstream.core import MAX_ID_BYTES
from memstream.producers import EVENT_TYPES, EntryFields, Event, clip_event, decode

# -- admission: one check of every entry, for every projection alike ------------------------


_TEXT_FIELDS = ("type", "id", "retry_of")


_SCOPE_IDS = ("tenant", "app", "agent", "user_id", "session_id", "run_id", "platform")


@dataclass(slots=True)
class Admission:
    """What to do with one stream entry: ``apply`` its ``event`` (``clipped``: the text
    fields clipped here), ``skip`` it (a newer event type, or a retry for another group:
    ``reason`` says which) or ``dead``-letter it (``reason``)."""

    action: str
    reason: str = ""
    event: Event | None = None
    clipped: tuple[str, ...] = ()


def _dead(reason: str) -> Admission:
    return Admission("dead", reason)


def admit(fields: EntryFields, group: str, max_text_bytes: int) -> Admission:
    """Check one entry's raw fields (names and values bytes or str). Never raises."""
    try:
        return _admit(fields, group, max_text_bytes)
    except Exception as exc:  # a bug here must not stop the projection: dead-letter, keep going
        return _dead(f"malformed: the entry could not be checked ({type(exc).__name__}: {exc})"[:2000])


def _admit(fields: EntryFields, group: str, max_text_bytes: int) -> Admission:
    # first: a dead-letter retry meant for another group is none of this group's business,
    # however malformed the rest (each group dead-letters its own copy once)
    only = fields.get(b"only_group", fields.get("only_group"))
    if only is not None:
        if isinstance(only, bytes):
            only = only.decode("utf-8", "surrogateescape")
        if str(only) != group:
            return Admission("skip", "a dead-letter retry for another group")
    values: dict[str, object] = {}
    for k, v in fields.items():
        if isinstance(k, bytes):
            try:
                k = k.decode("utf-8")
            except UnicodeDecodeError:
                return _dead(f"malformed: field name {k[:60]!r} is not UTF-8")
        values[str(k)] = v
    text: dict[str, str] = {}
    for name in _TEXT_FIELDS:
        value = values.get(name)
        if value is None:
            continue
        if isinstance(value, bytes):
            try:
                value = value.decode("utf-8")
            except UnicodeDecodeError:
                return _dead(f"malformed: field {name!r} is not UTF-8")
        text[name] = str(value)
    etype = text.get("type", "")
    if not etype:
        return _dead("malformed: entry has no 'type' field")
    if etype not in EVENT_TYPES:
        return Admission("skip", "unknown event type")
    data = values.get("data")
    if data is None:
        return _dead("malformed: entry has no 'data' field")
    if not isinstance(data, bytes):
        data = str(data).encode("utf-8", "surrogateescape")
    try:
        event = decode(data)
    except Exception as exc:  # msgspec.DecodeError / ValidationError
        return _dead(f"malformed: {exc}"[:2000])
    tag = type(event).__struct_config__.tag
    if tag != etype:
        return _dead(f"rejected: type field {etype[:60]!r} does not match the event body {tag!r}")
    if "id" in text and text["id"] != event.id:
        return _dead(f"rejected: id field {text['id'][:60]!r} does not match the event body's id {event.id[:60]!r}")
    if not event.id.strip():
        return _dead("rejected: the event id is empty (every projection keys its data by it)")
    if len(event.id.encode("utf-8")) > MAX_ID_BYTES:
        return _dead(f"rejected: the event id is over {MAX_ID_BYTES} bytes")
    if not event.scope.tenant.strip():
        return _dead("rejected: scope.tenant is empty (every projection keys its data by tenant)")
    for name in _SCOPE_IDS:
        if len(getattr(event.scope, name).encode("utf-8")) > MAX_ID_BYTES:
            return _dead(f"rejected: scope.{name} is over {MAX_ID_BYTES} bytes")
    event, clipped = clip_event(event, max_text_bytes)
    return Admission("apply", event=event, clipped=clipped)
