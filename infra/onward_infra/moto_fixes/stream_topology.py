"""How the DynamoDB streams of the tables an endpoint creates are sharded (`StreamTopology`), set for each
request of that endpoint (`topology_app`), so endpoints with different topologies share moto's backends in
one process; `answered`: a WSGI app's whole answer read while such a context holds."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class StreamTopology:
    """How the streams of tables created through an endpoint are sharded: `shards` open shards per stream
    at first; with `split_every_s`, one open shard splits in two every that many seconds."""

    shards: int = 1
    split_every_s: float | None = None

    def __post_init__(self) -> None:
        if self.shards < 1:
            raise ValueError(f"a stream has at least one shard, not {self.shards}")
        if self.split_every_s is not None and self.split_every_s <= 0:
            raise ValueError(f"split_every_s must be positive (or None for no timed splits), not "
                             f"{self.split_every_s}")


DEFAULT_TOPOLOGY = StreamTopology()
_request = threading.local()


def current_topology() -> StreamTopology:
    """The topology of the endpoint whose request is running on this thread (the default outside one)."""
    return getattr(_request, "topology", None) or DEFAULT_TOPOLOGY


@contextmanager
def using_topology(topology: StreamTopology) -> Iterator[None]:
    previous = getattr(_request, "topology", None)
    _request.topology = topology
    try:
        yield
    finally:
        _request.topology = previous


def topology_app(app: Callable[..., Iterable[bytes]], topology: StreamTopology) -> Callable[..., list[bytes]]:
    """A WSGI app that runs `app` (moto's) with `topology` for the tables its requests create."""

    def with_topology(environ: dict[str, Any], start_response: Callable[..., Any]) -> list[bytes]:
        with using_topology(topology):
            return answered(app, environ, start_response)

    return with_topology


def answered(app: Callable[..., Iterable[bytes]], environ: dict[str, Any],
             start_response: Callable[..., Any]) -> list[bytes]:
    """`app`'s whole answer, read (and the response closed) before returning: what it does inside a
    context (a topology, a retention) must happen while that context holds."""
    response = app(environ, start_response)
    try:
        return list(response)
    finally:
        close = getattr(response, "close", None)
        if close is not None:
            close()
