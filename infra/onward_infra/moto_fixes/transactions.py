"""Transactions.

moto deep-copies every table a transaction touches to be able to roll back, and keeps the copies: a
transaction costs O(table size) and memory grows without bound. It also evaluates each condition after
the previous actions of the same transaction were applied, where DynamoDB evaluates them all against the
state before the transaction.

`transact_write_items` here costs O(items in the transaction):
1. every condition is evaluated against the state before the transaction; any failure cancels the whole
   transaction before anything is written (no rollback needed, CancellationReasons as DynamoDB sends them);
2. the items the transaction touches (only those) are copied, the actions are applied, and should an action
   still fail (a validation error while applying), those items and the tables' stream records are restored;
3. each table's stream receives exactly one record per item the committed transaction changed, with the
   image before the transaction and the image after it.

The request's validation (moto's `DynamoHandler.transact_write_items`, before the backend's) parses every
item's condition expression and update expression only to list the attribute names they use, and checks
that each ExpressionAttributeNames entry is one of them: about a quarter of a transaction's time
in the endpoint. `handler_transact_write_items` is that validation, the same checks in the same order with
the same errors, the names read from the kept parses (conditions.names_found, expressions.names_used)
instead of trees built and walked per request. Off with ONWARD_LEAN_REQUESTS=false (moto's own).

The copies of step 2 are deep (about 30 us for a 20-attribute job row) unless no action of the transaction
changes a stored value in place (a Put, a Delete, an Update of top-level SET, REMOVE and ADD of a number:
updates.keeps_values): then each copy is the item's attribute map alone, sharing its values, which the
transaction only replaces (also off with ONWARD_LEAN_REQUESTS=false).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any, cast

from moto.core.responses import ActionResult
from moto.dynamodb.comparisons import get_filter_expression
from moto.dynamodb.exceptions import (
    ConditionalCheckFailed,
    ExpressionAttributeValuesEmpty,
    MockValidationException,
    MultipleTransactionsException,
    TooManyTransactionsException,
    TransactionCanceledException,
    TransactWriteSingleOpException,
)
from moto.dynamodb.models import DynamoDBBackend
from moto.dynamodb.models.dynamo_type import DynamoType, Item, LimitedSizeDict
from moto.dynamodb.models.table import Table
from moto.dynamodb.responses import DynamoHandler, validate_attributes_used, validate_put_has_empty_keys

from onward_infra.moto_fixes import conditions, expressions, server, updates
from onward_infra.moto_fixes.queries import mark_written, ranged_items, unranged_items

MAX_TRANSACTION_ACTIONS = 100
_ACTION_KINDS = frozenset({"ConditionCheck", "Put", "Delete", "Update"})
# A cancellation reason as TransactionCanceledException takes it: (code, message, old image), or no reason.
_Reason = tuple[str, str, dict[str, Any] | None] | tuple[None, None, None]
_NO_REASON: tuple[None, None, None] = (None, None, None)


@dataclass(frozen=True)
class _Action:
    kind: str
    table: Table
    key: dict[str, Any]
    hash_key: DynamoType
    range_key: DynamoType | None
    request: dict[str, Any]

    @property
    def identity(self) -> tuple[str, DynamoType, DynamoType | None]:
        return (self.table.name, self.hash_key, self.range_key)

    def current(self) -> Item | None:
        return self.table.get_item(self.hash_key, self.range_key)


def _parse(backend: DynamoDBBackend, entry: dict[str, Any]) -> _Action:
    if len(entry) != 1:
        raise TransactWriteSingleOpException()
    kind, request = next(iter(entry.items()))
    if kind not in _ACTION_KINDS:
        raise MockValidationException(f"Unsupported transaction action {kind}")
    table = backend.get_table(request["TableName"])
    if kind == "Put":
        key_names = [table.hash_key_attr] + ([table.range_key_attr] if table.range_key_attr else [])
        missing = [name for name in key_names if name not in request["Item"]]
        if missing:
            raise MockValidationException(
                f"One or more parameter values were invalid: Missing the key {missing[0]} in the item"
            )
        key = {name: request["Item"][name] for name in key_names}
    else:
        key = request["Key"]
    hash_key, range_key = backend.get_keys_value(table, key)
    return _Action(kind, table, key, hash_key, range_key, request)


def _cancellation_reason(action: _Action) -> _Reason:
    expression = action.request.get("ConditionExpression")
    if expression is None:
        return _NO_REASON
    current = action.current()
    condition = get_filter_expression(
        expression,
        action.request.get("ExpressionAttributeNames"),
        action.request.get("ExpressionAttributeValues"),
    )
    try:
        satisfied = condition.expr(current)
    except TypeError:
        # moto compares mismatched types (`txt > :number`) with Python's operators and raises, which the
        # server turns into an HTTP 500; DynamoDB only compares values of one type: the condition is false.
        satisfied = False
    if satisfied:
        return _NO_REASON
    old_image = None
    if action.request.get("ReturnValuesOnConditionCheckFailure") == "ALL_OLD" and current is not None:
        old_image = current.to_json()["Attributes"]
    return ("ConditionalCheckFailed", ConditionalCheckFailed().message, old_image)


def _apply(backend: DynamoDBBackend, action: _Action) -> None:
    request = action.request
    if action.kind == "Put":
        backend.put_item(action.table.name, request["Item"])
    elif action.kind == "Update":
        backend.update_item(
            action.table.name,
            action.key,
            update_expression=request["UpdateExpression"],
            # None when absent, as moto's own transact_write_items passes them (moto annotates dict)
            expression_attribute_names=request.get("ExpressionAttributeNames"),  # type: ignore[arg-type]  # None ok
            expression_attribute_values=request.get("ExpressionAttributeValues"),  # type: ignore[arg-type]  # None ok
        )
    elif action.kind == "Delete":
        backend.delete_item(action.table.name, action.key)


def _keeps_values(action: _Action) -> bool:
    """Whether applying the action leaves every value the stored items hold unchanged (a Put or a Delete
    replaces or drops the stored item; an Update, see updates.keeps_values)."""
    if action.kind != "Update":
        return True
    return updates.keeps_values(action.request.get("UpdateExpression"),
                                action.request.get("ExpressionAttributeValues"))


def _with_own_attributes(item: Item | None) -> Item | None:
    """A copy of `item` (as Item.__deepcopy__ builds it: its keys, its attribute map) holding its very values
    in a map of its own: what the item was, for as long as no value it holds is changed in place."""
    if item is None:
        return None
    copied = cast(Item, item.__class__.__new__(item.__class__))
    copied.hash_key, copied.range_key = item.hash_key, item.range_key
    attrs = LimitedSizeDict.__new__(LimitedSizeDict)
    dict.update(attrs, item.attrs)  # (not LimitedSizeDict's size check per attribute: the item passed it)
    copied.attrs = attrs
    return copied


class _Touched:
    """The items one transaction writes, as they were before it, plus each stream's length. Each item is
    deep-copied, unless no action of the transaction changes a stored value in place (`_keeps_values`):
    then the copy shares the item's values (about a tenth of a transaction's time went to deep copies)."""

    def __init__(self, writes: list[_Action]) -> None:
        self._writes = writes
        shallow = server.LEAN and all(_keeps_values(action) for action in writes)
        copy_item = _with_own_attributes if shallow else copy.deepcopy
        self._before = [copy_item(action.current()) for action in writes]
        self._stream_lengths = {
            id(action.table): len(action.table.stream_shard.items)
            for action in writes
            if action.table.stream_shard is not None
        }

    def restore(self) -> None:
        for action, before in zip(self._writes, self._before, strict=True):
            _store(action, before)
        self._truncate_streams()

    def rewrite_stream_records(self) -> None:
        """One record per changed item, before-image to after-image (moto's own calls may have emitted
        several, e.g. two INSERTs for an Update that creates an item)."""
        self._truncate_streams()
        for action, before in zip(self._writes, self._before, strict=True):
            shard = action.table.stream_shard
            after = action.current()
            if shard is None or _attributes(before) == _attributes(after):
                continue
            shard.add(before, after)

    def _truncate_streams(self) -> None:
        for action in self._writes:
            shard = action.table.stream_shard
            if shard is not None:
                del shard.items[self._stream_lengths[id(action.table)] :]


def _attributes(item: Item | None) -> dict[str, Any] | None:
    return None if item is None else item.to_json()["Attributes"]


def _store(action: _Action, item: Item | None) -> None:
    mark_written(action.table, (action.hash_key, action.range_key))
    if action.range_key is None:
        items = unranged_items(action.table)
        if item is None:
            items.pop(action.hash_key, None)
        else:
            items[action.hash_key] = item
        return
    rows = ranged_items(action.table)
    by_range = rows[action.hash_key]  # a defaultdict: {} for a new hash key
    if item is None:
        by_range.pop(action.range_key, None)
        if not by_range:
            rows.pop(action.hash_key, None)
    else:
        by_range[action.range_key] = item


def transact_write_items(self: DynamoDBBackend, transact_items: list[dict[str, Any]]) -> None:
    """All-or-nothing TransactWriteItems in O(items in the transaction)."""
    if len(transact_items) > MAX_TRANSACTION_ACTIONS:
        raise TooManyTransactionsException()
    actions = [_parse(self, entry) for entry in transact_items]
    if len({action.identity for action in actions}) != len(actions):
        raise MultipleTransactionsException()

    reasons = [_cancellation_reason(action) for action in actions]
    if any(code is not None for code, _, _ in reasons):
        raise TransactionCanceledException(reasons)

    writes = [action for action in actions if action.kind != "ConditionCheck"]
    touched = _Touched(writes)
    for position, action in enumerate(actions):
        try:
            _apply(self, action)
        except MockValidationException:
            touched.restore()
            raise
        except Exception as error:
            touched.restore()
            failed: list[_Reason] = [_NO_REASON] * len(actions)
            failed[position] = (type(error).__name__, str(error), None)
            raise TransactionCanceledException(failed) from error
    touched.rewrite_stream_records()


_EMPTY_KEY_MESSAGE = ("One or more parameter values are not valid. The AttributeValue for a key attribute cannot "
                      "contain an empty string value. Key: {}")


def handler_transact_write_items(self: DynamoHandler) -> ActionResult:
    """moto's DynamoHandler.transact_write_items: the request validated (every ExpressionAttributeNames
    entry used, no empty key, no empty ExpressionAttributeValues) with the names each expression uses read
    from its kept parse, then the backend's transaction."""
    if not server.LEAN:
        return _original_handler_transact_write_items(self)
    transact_items = self.body["TransactItems"]
    for item in transact_items:
        # each entry holds one of Put, Update, Delete, ConditionCheck; an empty one raises moto's IndexError
        item_values = list(item.values())[0]  # noqa: RUF015 - next(iter(...)) would raise StopIteration
        expression_attribute_names = item_values.get("ExpressionAttributeNames", {})
        names_used = conditions.names_found(item_values.get("ConditionExpression"), expression_attribute_names,
                                            item_values.get("ExpressionAttributeValues", {}))
        if "Put" in item:
            if item["Put"].get("ExpressionAttributeValues") == {}:
                raise ExpressionAttributeValuesEmpty
            validate_put_has_empty_keys(item["Put"]["Item"], self.dynamodb_backend.get_table(item["Put"]["TableName"]))
        if "Update" in item:
            if item["Update"].get("ExpressionAttributeValues") == {}:
                raise ExpressionAttributeValuesEmpty
            validate_put_has_empty_keys(item["Update"]["Key"],
                                        self.dynamodb_backend.get_table(item["Update"]["TableName"]),
                                        custom_error_msg=_EMPTY_KEY_MESSAGE)
            names_used += expressions.names_used(item["Update"]["UpdateExpression"])
        validate_attributes_used(expression_attribute_names, names_used, validation_error_prefix=False)
    self.dynamodb_backend.transact_write_items(transact_items)
    return ActionResult({"ConsumedCapacity": [], "ItemCollectionMetrics": {}})


_original_handler_transact_write_items = DynamoHandler.transact_write_items

PATCHES = ((DynamoDBBackend, "transact_write_items", transact_write_items),
           (DynamoHandler, "transact_write_items", handler_transact_write_items))
