"""Our fixes to moto, for the embedded endpoint (tested against moto 5.2.5); each module says what it fixes
and why:

- `transactions`: TransactWriteItems all-or-nothing in O(items in the transaction), conditions checked
  against the state before it, one stream record per changed item; its request validated with the names
  each expression uses read from the kept parses (no tree built); the items copied by their attribute map
  alone when no action changes a stored value in place;
- `expressions`: an update expression parsed once per expression string, not twice per update; the
  validator's copy of it unpickled, not deep-copied; its validation passes walk the tree without looking
  their node types up again at every node;
- `updates`: an update expression of the platform's shapes applied to the item without moto's validator and
  executor, whenever nothing could make them raise (anything else is moto's own update);
- `queries`: a Query reads only its partition (index partitions kept in maps updated from every write);
- `query_results`: the items of a Query's or Scan's answer are not deep-copied where the copy could not
  change the answer; a projection converts the item once, not once per projected path;
- `kinesis`: records found by sequence number; resharding as Kinesis does it;
- `streams`: DynamoDB Streams sharded as on AWS (several open shards per table stream, records routed by
  partition key, wide interleaved sequence numbers, splits with lineage, paginated DescribeStream);
- `server`: the request's service found without listing moto's package on every request; item
  operations' answers written without walking botocore's shapes; a response class's methods listed once;
- `connections`: the endpoint's connections kept open between requests (HTTP/1.1 keep-alive, TCP_NODELAY)
  instead of werkzeug's one connection, one thread and a 10 ms drain per request; the SDKs' requests read
  from the connection's buffer without http.server's parsing; nothing of moto's is patched (the endpoint
  uses its request handler and wraps its server);
- `sizes`: an item's size (moto's 400 KB item limit, 1 MB Query page, 16 MB BatchGetItem answer) computed in
  one function per container instead of method calls per value; an item built in O(item), not sized again
  at each of its attributes;
- `retention`: TTL deletions (REMOVE records with the TTL service's identity), DynamoDB stream records
  trimmed after 24 h and Kinesis records after the stream's retention, swept by an endpoint's thread;
- here, memory: moto keeps every item and stream record it ever built.

`install()` puts them all in place (idempotent), `uninstall()` puts moto's own back (the transaction
benchmark measures both side by side).
"""

from __future__ import annotations

import inspect
from typing import Any

from moto.core.common_models import BaseModel
from moto.dynamodb.models.dynamo_type import Item
from moto.dynamodb.models.table import StreamRecord
from moto.kinesis.models import Record as KinesisRecord

from onward_infra.moto_fixes import (
    conditions,
    connections,
    expressions,
    kinesis,
    queries,
    query_results,
    request_setup,
    retention,
    scans,
    server,
    sizes,
    streams,
    transactions,
    updates,
)

# (owner, attribute, ours); moto's own, read before anything is patched, to put back
_PATCHES: tuple[tuple[Any, str, Any], ...] = (*transactions.PATCHES, *queries.PATCHES, *query_results.PATCHES,
                                              *kinesis.PATCHES,
                                              *server.PATCHES, *streams.PATCHES, *retention.PATCHES,
                                              *connections.PATCHES, *expressions.PATCHES,
                                              *updates.PATCHES, *request_setup.PATCHES,
                                              *conditions.PATCHES, *scans.PATCHES, *sizes.PATCHES)
# read statically: a classmethod (retention's) is put back as the classmethod it was, not as a bound method
_ORIGINALS = tuple(inspect.getattr_static(owner, attribute) for owner, attribute, _ in _PATCHES)


class _Untracked(list[object]):
    """Stands in for a moto model's `instances_tracked`: moto appends every instance of every model to it
    (for its /moto-api/data.json dashboard) and never lets go, so every Item ever built (each overwritten
    row, each copy taken before a write) and every stream record, even a discarded one, would stay in
    memory for the life of the endpoint."""

    def append(self, instance: object) -> None:
        """Keep nothing."""


_UNTRACKED_MODELS: tuple[type[BaseModel], ...] = (Item, StreamRecord, KinesisRecord)


def install() -> None:
    """Put every fix in place (idempotent)."""
    if not installed():
        queries.new_generation()
    for owner, attribute, ours in _PATCHES:
        setattr(owner, attribute, ours)
    for model in _UNTRACKED_MODELS:
        # instances_tracked: set on each model class by moto's metaclass, declared nowhere (moto ignores it too)
        if not isinstance(model.instances_tracked, _Untracked):  # type: ignore[attr-defined]  # see above
            model.instances_tracked = _Untracked()  # type: ignore[attr-defined]  # moto's undeclared attribute


def uninstall() -> None:
    """Put moto's own methods back."""
    queries.new_generation()
    for (owner, attribute, _), original in zip(_PATCHES, _ORIGINALS, strict=True):
        setattr(owner, attribute, original)
    for model in _UNTRACKED_MODELS:
        model.instances_tracked = []  # type: ignore[attr-defined]  # moto's metaclass attribute, undeclared


def installed() -> bool:
    return all(inspect.getattr_static(owner, attribute) is ours for owner, attribute, ours in _PATCHES)
