"""memstream's errors (memstream.core.errors): one base, each class transient or permanent,
and ``is_transient`` telling a dependency's failure from the input's."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import pytest
import redis

import memstream
from memstream.core import MemstreamError, PermanentError, TransientError, is_transient

BASES = (MemstreamError, TransientError, PermanentError)


def _exception_classes() -> list[type[BaseException]]:
    """Every exception class defined at the top of a memstream module."""
    found = []
    for info in pkgutil.walk_packages(memstream.__path__, "memstream."):
        if info.name.endswith("__main__"):  # runs the command line when imported
            continue
        module = importlib.import_module(info.name)
        for _, cls in inspect.getmembers(module, inspect.isclass):
            if cls.__module__ == info.name and issubclass(cls, BaseException):
                found.append(cls)
    return found


EXCEPTIONS = _exception_classes()


def test_the_walk_finds_the_exceptions_callers_know():
    names = {cls.__name__ for cls in EXCEPTIONS}
    assert {
        "StoreError",
        "StoreUnavailable",
        "EmbedderError",
        "EmbedderUnavailable",
        "QueryRefused",
        "QueryTimeout",
        "TenantError",
        "CommandError",
        "ValkeyStartError",
        "AlreadyRunning",
        "HermesInstallError",
        "RecallUnavailable",
        "BenchDataError",
    } <= names


@pytest.mark.parametrize("cls", EXCEPTIONS, ids=lambda c: f"{c.__module__}.{c.__name__}")
def test_every_memstream_exception_is_transient_or_permanent_never_both(cls):
    assert issubclass(cls, MemstreamError)
    if cls not in BASES:
        assert issubclass(cls, TransientError) != issubclass(cls, PermanentError)


def test_the_exceptions_keep_their_names_where_callers_import_them_and_their_second_base():
    from memstream.producers import TenantError
    from memstream.projections import (
        CollectionNotFound,
        EmbedderUnavailable,
        StoreError,
        StoreUnavailable,
    )
    from memstream.projections.embedders.port import EmbedderError
    from memstream.projections.stores.port import DimensionMismatch, StoreLocked
    from memstream.query import QueryRefused, QueryTimeout

    for transient in (StoreUnavailable, StoreLocked, EmbedderUnavailable, QueryTimeout):
        assert issubclass(transient, TransientError), transient
    for permanent in (StoreError, CollectionNotFound, DimensionMismatch, EmbedderError, QueryRefused, TenantError):
        assert issubclass(permanent, PermanentError), permanent
    assert issubclass(QueryRefused, ValueError) and issubclass(TenantError, ValueError)


@pytest.mark.parametrize(
    "exc",
    [
        TransientError("any dependency down"),
        type("QueueDown", (TransientError,), {})("a kind no list names"),
        redis.ConnectionError("Connection refused"),
        redis.TimeoutError("Timeout reading from socket"),
        redis.exceptions.OutOfMemoryError("command not allowed when used memory > 'maxmemory'."),
        redis.exceptions.ReadOnlyError("You can't write against a read only replica."),
        redis.exceptions.BusyLoadingError("Redis is loading the dataset in memory"),
        redis.ResponseError("MISCONF Errors writing to the AOF file"),
        redis.ResponseError("BUSY Redis is busy running a script."),
        redis.ResponseError("NOREPLICAS Not enough good replicas to write."),
        redis.ResponseError("Command # 1 (HSET k f v) of pipeline caused error: OOM command not allowed"),
    ],
    ids=repr,
)
def test_a_dependencys_failure_is_transient(exc):
    assert is_transient(exc)


@pytest.mark.parametrize(
    "exc",
    [
        PermanentError("this input can never succeed"),
        redis.ResponseError("NOGROUP No such key 'k' or consumer group 'g'"),
        redis.ResponseError("WRONGTYPE Operation against a key holding the wrong kind of value"),
        redis.exceptions.NoPermissionError("NOPERM this user has no permissions"),
        ValueError("bad event"),
        RuntimeError("a bug"),
    ],
    ids=repr,
)
def test_the_inputs_fault_or_a_bug_is_not_transient(exc):
    assert not is_transient(exc)


def test_store_and_embedder_outages_are_transient_and_their_refusals_are_not():
    from memstream.projections import EmbedderUnavailable, StoreError, StoreUnavailable
    from memstream.projections.embedders.port import EmbedderError
    from memstream.projections.stores.port import DimensionMismatch, StoreLocked

    assert all(
        is_transient(e)
        for e in (StoreUnavailable("qdrant 503"), StoreLocked("open elsewhere"), EmbedderUnavailable("ollama down"))
    )
    assert not any(is_transient(e) for e in (StoreError("closed"), DimensionMismatch("384 != 8"), EmbedderError("no model")))
