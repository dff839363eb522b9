"""``memstream search``: one question to the query server, as the agents ask it."""

from __future__ import annotations

from memstream.core import Settings
from memstream.ops.connect import connect
from memstream.ops.errors import CommandError

__all__ = ["search"]


def search(
    settings: Settings, query: str, *, tenant: str | None, agent: str, scope: str, k: int, timeout: float, rerank: bool = True
) -> dict:
    """The answer to searching for ``query`` (``tenant`` None: the configured one), as the
    query server gives it (``results``, ``searched``, ``elsewhere``; with ``rerank``, the
    best candidates reordered by the cross-encoder, as the agents' search tool asks, and
    ``reranked``); ``CommandError`` when none answers within ``timeout`` seconds, the
    request is refused, or the search failed."""
    from memstream.query import MAX_QUERY_CHARS, QueryRefused, QueryTimeout, SearchRequest, ask

    eventlog = connect(settings)
    request = SearchRequest(
        query=query[:MAX_QUERY_CHARS], tenant=tenant or settings.tenant, agent=agent, scope=scope, k=k, rerank=rerank
    )
    try:
        answer = ask(eventlog.client, eventlog.prefix, request, timeout=timeout)
    except (QueryTimeout, QueryRefused) as exc:
        raise CommandError(str(exc)) from exc
    if "error" in answer:
        raise CommandError(f"search failed: {answer['error']}")
    answer.pop("queued_ms", None)
    return answer
