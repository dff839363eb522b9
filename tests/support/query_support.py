"""Asking the read ops as a query server does, without Redis: ``answer`` decodes a request
dict into its typed request (as the server's decoder does, limits included) and returns
the handler's answer as the asker reads it (plain JSON data)."""

from __future__ import annotations

from typing import Any

import msgspec

from memstream.query.protocol import OP_OF, Handlers, Request


def answer(handlers: Handlers, request: dict[str, Any]) -> dict[str, Any]:
    """The answer of ``handlers`` to ``request`` (a dict with ``op``); ``msgspec.ValidationError``
    for a request the protocol refuses, ``KeyError`` for an op the table does not answer."""
    typed = msgspec.json.decode(msgspec.json.encode(request), type=Request)
    handler = handlers.of(OP_OF[type(typed)])
    if handler is None:
        raise KeyError(request["op"])
    out: dict[str, Any] = msgspec.to_builtins(handler(typed))
    return out
