"""What an embedded endpoint tells its observers about each DynamoDB write it committed, and the Region an
endpoint is.

`WriteTap.app` wraps moto's app inside the endpoint's request lock (onward_infra.endpoint.SerializedApp): after
a PutItem, UpdateItem, DeleteItem, BatchWriteItem or TransactWriteItems answered 200, each observer is told
the table and key of every item the request wrote, while the lock still holds, so that it reads the items as
that request left them and no other request has run since. A refused request (a failed condition, a cancelled
transaction) wrote nothing and is told to no one. Without observers a request costs one list check.

`in_region` makes every request of an endpoint land in one Region's moto backends: moto takes a request's
Region from the URL, then from `region/<name>` in its User-Agent, then from its signature
(moto.core.responses.BaseResponse.get_region_from_url); the endpoint's clients send no Region in the URL and
the platform's DynamoDB, Streams and Kinesis requests are unsigned, so the endpoint names its Region in the
User-Agent of each request. Two endpoints of different Regions in one process share moto's code, not a table.
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from onward_infra.moto_fixes.stream_topology import answered

WsgiApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]
DEFAULT_REGION = "us-east-1"  # moto's default: an endpoint of it is left as it is
_TARGET_PREFIX = "DynamoDB_20120810."
WRITING_OPERATIONS = frozenset({"PutItem", "UpdateItem", "DeleteItem", "BatchWriteItem", "TransactWriteItems"})


@dataclass(frozen=True)
class ItemWrite:
    """One item a committed request wrote: its table's name and its key (attribute name -> wire value)."""

    table: str
    key: dict[str, Any] | None  # None for a Put: the key is read from `item` by the table's key schema
    item: dict[str, Any] | None = None  # the item a Put wrote


WriteObserver = Callable[[str, list[ItemWrite]], None]  # (region, the request's writes)


def written_items(operation: str, request: dict[str, Any]) -> Iterator[ItemWrite]:
    """The items a committed request of `operation` wrote, in the request's order (a transaction's
    ConditionCheck writes nothing)."""
    if operation == "PutItem":
        yield ItemWrite(request["TableName"], None, request["Item"])
    elif operation in ("UpdateItem", "DeleteItem"):
        yield ItemWrite(request["TableName"], request["Key"])
    elif operation == "BatchWriteItem":
        for table, requests in request.get("RequestItems", {}).items():
            for entry in requests:
                if "PutRequest" in entry:
                    yield ItemWrite(table, None, entry["PutRequest"]["Item"])
                elif "DeleteRequest" in entry:
                    yield ItemWrite(table, entry["DeleteRequest"]["Key"])
    elif operation == "TransactWriteItems":
        for action in request.get("TransactItems", []):
            if "Put" in action:
                yield ItemWrite(action["Put"]["TableName"], None, action["Put"]["Item"])
            for kind in ("Update", "Delete"):
                if kind in action:
                    yield ItemWrite(action[kind]["TableName"], action[kind]["Key"])


class WriteTap:
    """The observers of one endpoint's committed DynamoDB writes (see the module's docstring)."""

    def __init__(self, region: str) -> None:
        self.region = region
        self._observers: list[WriteObserver] = []

    def observe(self, observer: WriteObserver) -> None:
        self._observers.append(observer)

    def forget(self, observer: WriteObserver) -> None:
        if observer in self._observers:
            self._observers.remove(observer)

    def app(self, app: WsgiApp) -> WsgiApp:
        """`app` (moto's), telling the observers about each write it committed."""

        def tapped(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
            target = environ.get("HTTP_X_AMZ_TARGET", "")
            operation = target.removeprefix(_TARGET_PREFIX)
            if not self._observers or operation == target or operation not in WRITING_OPERATIONS:
                return app(environ, start_response)
            body = environ["wsgi.input"].read(int(environ.get("CONTENT_LENGTH") or 0))
            environ["wsgi.input"] = io.BytesIO(body)
            status: list[int] = []

            def recording(code: str, *args: Any) -> Any:
                status.append(int(code.split(maxsplit=1)[0]))
                return start_response(code, *args)

            answer = answered(app, environ, recording)
            if status and status[0] == 200:
                writes = list(written_items(operation, json.loads(body)))
                for observer in list(self._observers):
                    observer(self.region, writes)
            return answer

        return tapped


def in_region(app: WsgiApp, region: str) -> WsgiApp:
    """`app` with every request in `region`'s moto backends (see the module's docstring)."""
    if region == DEFAULT_REGION:
        return app

    def regional(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        environ["HTTP_USER_AGENT"] = f"region/{region} {environ.get('HTTP_USER_AGENT', '')}"
        return app(environ, start_response)

    return regional
