"""Updates. moto's `DynamoDBBackend.update_item` (UpdateItem, and each Update of a TransactWriteItems) runs
ten validation passes over a fresh copy of the parsed update expression, then an executor over the result:
about a third of a transaction's time on the endpoint, for the few simple shapes the platform sends.

`update_item` here applies an update expression directly to moto's Item when it can prove that moto's
validator would accept it and what moto's executor would leave; otherwise (or on anything it cannot prove)
it calls moto's own `update_item`, unchanged, before anything is read into or written to the item.

- The shape, decided once per expression string from moto's own parsed tree (`expressions.make` keeps it):
  at most one SET, ADD and REMOVE clause, no DELETE; every path one top-level attribute (a name or a
  `#placeholder`); SET to `:value`, to a path, to `if_not_exists(path, :value)` or to `operand +|- operand`
  (each operand a path or a `:value`); ADD of a `:value`; REMOVE of a path. The actions are taken in the
  order moto's `normalize()` gives them (REMOVEs, which touch only their own attributes, in any order).
- Per request, before the item is touched, anything on which moto's validator or executor would raise
  sends the request to moto: a placeholder missing from the names or values, a reserved word as a plain
  name, a table key attribute on any path, two actions on one attribute, a path read that the item lacks
  (outside `if_not_exists`), arithmetic that moto's DynamoType refuses, ADD of anything but a number or to a
  non-number, an empty value (a value that is false, BOOL false aside), a SET of a value of another type
  than the attribute definition of the same raw name (moto compares the placeholder itself, as we do), an
  item that could reach moto's size limit at any of its assignments (its size plus every assigned
  attribute's).
- Then moto's steps, in moto's order: the item read, its deep copy for the stream record, the Expected and
  ConditionExpression checks (ConditionalCheckFailed with the old image as moto sends it), the new item put
  first when there is none (moto's `table.put_item`, its stream record included), the actions (values
  resolved against the item before any action, as moto's validator does; each SET of a path's value
  assigns that very DynamoType, as moto's does), the stream record. `queries.update_item` still wraps it
  (marks the item written).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast

from moto.dynamodb.comparisons import create_condition_expression_parser
from moto.dynamodb.exceptions import ConditionalCheckFailed
from moto.dynamodb.models import DynamoDBBackend
from moto.dynamodb.models.dynamo_type import DynamoType, Item, LimitedSizeDict
from moto.dynamodb.models.table import Table
from moto.dynamodb.models.utilities import bytesize
from moto.dynamodb.parsing.ast_nodes import (  # type: ignore[attr-defined]  # untyped
    ExpressionAttribute,
    ExpressionAttributeName,
    ExpressionAttributeValue,
    ExpressionValueOperator,
    UpdateExpression,
    UpdateExpressionAddAction,
    UpdateExpressionAddActions,
    UpdateExpressionAddClause,
    UpdateExpressionDeleteAction,
    UpdateExpressionFunction,
    UpdateExpressionPath,
    UpdateExpressionRemoveAction,
    UpdateExpressionRemoveActions,
    UpdateExpressionRemoveClause,
    UpdateExpressionSetAction,
    UpdateExpressionSetActions,
    UpdateExpressionSetClause,
    UpdateExpressionValue,
)
from moto.dynamodb.parsing.expressions import UpdateExpressionParser  # type: ignore[attr-defined]  # untyped
from moto.dynamodb.parsing.reserved_keywords import ReservedKeywords

from onward_infra.moto_fixes import queries
from onward_infra.moto_fixes.expression_cache import ExpressionCache

MAX_ITEM_SIZE = 405000  # moto's LimitedSizeDict limit

# moto's own update_item, the one queries.update_item wraps (read when this module is imported, before install)
moto_update_item: Callable[..., Item] = queries._original_update_item
_RESERVED = frozenset(ReservedKeywords.get_reserved_keywords())
_CONTAINERS = (UpdateExpression, UpdateExpressionSetClause, UpdateExpressionSetActions, UpdateExpressionAddClause,
               UpdateExpressionAddActions, UpdateExpressionRemoveClause, UpdateExpressionRemoveActions)
_ACTIONS = (UpdateExpressionSetAction, UpdateExpressionAddAction, UpdateExpressionRemoveAction,
            UpdateExpressionDeleteAction)


@dataclass(frozen=True)
class _Name:
    """One top-level attribute: a plain name, or a placeholder to look up in the request's names."""

    raw: str
    placeholder: bool

    def resolve(self, names: dict[str, str] | None) -> str | None:
        if not self.placeholder:
            return self.raw
        if names is None:
            return None
        found = names.get(self.raw)
        return found if isinstance(found, str) else None


@dataclass(frozen=True)
class _Value:
    placeholder: str


# an operand of SET: a path or a value; a SET's source: an operand, if_not_exists or arithmetic
_Operand = _Name | _Value


@dataclass(frozen=True)
class _IfNotExists:
    path: _Name
    default: _Value


@dataclass(frozen=True)
class _Arithmetic:
    left: _Operand
    operator: str
    right: _Operand


@dataclass(frozen=True)
class _Action:
    kind: str  # "SET", "ADD", "REMOVE"
    target: _Name
    source: _Operand | _IfNotExists | _Arithmetic | None  # None for REMOVE


@dataclass(frozen=True)
class _Shape:
    actions: tuple[_Action, ...]
    paths: tuple[_Name, ...]  # every path of the expression, targets and operands
    values: tuple[str, ...]  # every value placeholder, in order of appearance


_shapes: ExpressionCache[str, _Shape | None] = ExpressionCache()
_NOT_KEPT = object()


def _only_child(node: Any) -> Any:
    children = node.children
    return children[0] if isinstance(children, list) and len(children) == 1 else None


def _path(node: Any) -> _Name | None:
    if type(node) is not UpdateExpressionPath:
        return None
    element = _only_child(node)
    if type(element) is ExpressionAttribute and isinstance(_only_child(element), str):
        return _Name(element.children[0], placeholder=False)
    if type(element) is ExpressionAttributeName and isinstance(_only_child(element), str):
        return _Name(element.children[0], placeholder=True)
    return None


def _value(node: Any) -> _Value | None:
    if type(node) is ExpressionAttributeValue and isinstance(_only_child(node), str):
        return _Value(node.children[0])
    return None


def _operand(node: Any) -> _Operand | None:
    return _path(node) or _value(node)


def _source(node: Any) -> _Operand | _IfNotExists | _Arithmetic | None:
    if type(node) is not UpdateExpressionValue or not isinstance(node.children, list):
        return None
    children = node.children
    if len(children) == 1:
        only = children[0]
        if type(only) is UpdateExpressionFunction:
            arguments = only.children
            if len(arguments) != 3 or arguments[0] != "if_not_exists":
                return None  # list_append and anything else: moto's
            path, default = _path(arguments[1]), _value(arguments[2])
            return None if path is None or default is None else _IfNotExists(path, default)
        return _operand(only)
    if len(children) == 3 and type(children[1]) is ExpressionValueOperator:
        left, operator, right = _operand(children[0]), _only_child(children[1]), _operand(children[2])
        if left is None or right is None or operator not in ("+", "-"):
            return None
        return _Arithmetic(left, operator, right)
    return None


def _actions(node: Any, found: list[Any]) -> bool:
    """The tree's actions in depth-first order into `found`; False for any node outside the known shapes."""
    if type(node) in _ACTIONS:
        found.append(node)
        return True
    if type(node) not in _CONTAINERS or not isinstance(node.children, list):
        return False
    return all(_actions(child, found) for child in node.children)


def _action(node: Any) -> _Action | None:
    children = node.children
    target = _path(children[0]) if isinstance(children, list) and children else None
    if target is None:
        return None
    if type(node) is UpdateExpressionRemoveAction:
        return _Action("REMOVE", target, None) if len(children) == 1 else None
    if len(children) != 2:
        return None
    if type(node) is UpdateExpressionAddAction:
        value = _value(children[1])
        return None if value is None else _Action("ADD", target, value)
    if type(node) is UpdateExpressionSetAction:
        source = _source(children[1])
        return None if source is None else _Action("SET", target, source)
    return None  # DELETE


def _shape_of(tree: Any) -> _Shape | None:
    if type(tree) is not UpdateExpression:
        return None
    nodes: list[Any] = []
    if not _actions(tree, nodes):
        return None
    # moto executes what normalize() finds: the same actions, in the same order
    if [id(node) for node in tree.find_clauses(list(_ACTIONS))] != [id(node) for node in nodes]:
        return None
    for clause in (UpdateExpressionSetClause, UpdateExpressionAddClause, UpdateExpressionRemoveClause):
        if len(tree.find_clauses([clause])) > 1:
            return None
    actions = []
    for node in nodes:
        action = _action(node)
        if action is None:
            return None
        actions.append(action)
    paths: list[_Name] = []
    values: list[str] = []
    for action in actions:
        paths.append(action.target)
        source = action.source
        operands: list[_Operand] = []
        if isinstance(source, _IfNotExists):
            operands = [source.path, source.default]
        elif isinstance(source, _Arithmetic):
            operands = [source.left, source.right]
        elif source is not None:
            operands = [source]
        for operand in operands:
            if isinstance(operand, _Name):
                paths.append(operand)
            else:
                values.append(operand.placeholder)
    if any(not path.placeholder and path.raw.upper() in _RESERVED for path in paths):
        return None
    return _Shape(tuple(actions), tuple(paths), tuple(values))


def shape(update_expression: str) -> _Shape | None:
    """The expression's shape, or None for one left to moto (kept per expression string)."""
    kept = _shapes.get(update_expression, _NOT_KEPT)  # one lookup (None is a kept answer: left to moto)
    if kept is not _NOT_KEPT:
        return cast("_Shape | None", kept)
    try:
        tree = UpdateExpressionParser.make(update_expression)
        found = _shape_of(tree)
    except Exception:  # noqa: BLE001 - an invalid expression: moto raises its own error
        return None
    return _shapes.keep(update_expression, found)


def keeps_values(update_expression: object, values: dict[str, Any] | None) -> bool:
    """Whether applying `update_expression` to an item, by our update or moto's (whichever runs), leaves every
    value the item held unchanged, replacing or removing attributes only: an expression of a known shape
    (`shape`: top-level paths, no DELETE) whose every ADD adds a number (`values`: the request's), which moto
    too adds into a new value. False for anything else: moto's ADD of a set appends to the stored set, and its
    SET or REMOVE of a nested path changes the stored map or list."""
    if not isinstance(update_expression, str) or not update_expression:
        return False
    found = shape(update_expression)
    if found is None:
        return False
    for action in found.actions:
        if action.kind == "ADD":
            assert isinstance(action.source, _Value)  # (an ADD's source, by _action)
            added = values.get(action.source.placeholder) if isinstance(values, dict) else None
            if not isinstance(added, dict) or list(added) != ["N"]:
                return False
    return True


# What to do to the item: (attribute, its new value) for SET and ADD, (attribute, None) for REMOVE
_Plan = list[tuple[str, DynamoType | None]]


def _is_empty(value: DynamoType) -> bool:
    return not value.value and value.type != "BOOL"


def _plan(shape: _Shape, table: Table, attrs: dict[str, DynamoType], names: dict[str, str] | None,
          values: dict[str, Any] | None) -> _Plan | None:
    """moto's validated and executed update as assignments, or None wherever moto could raise."""
    resolved: dict[_Name, str] = {}
    for path in shape.paths:
        name = path.resolve(names)
        if name is None or name in table.table_key_attrs:
            return None
        resolved[path] = name
    targets = [resolved[action.target] for action in shape.actions]
    if len(set(targets)) != len(targets):
        return None
    if shape.values and values is None:
        return None
    for placeholder in shape.values:
        if placeholder not in values:  # type: ignore[operator]  # not None when shape.values: checked above
            return None

    def operand(item: _Operand) -> DynamoType | None:
        if isinstance(item, _Name):
            return attrs.get(resolved[item])  # that very DynamoType, as moto's resolver gives it
        return DynamoType(values[item.placeholder])  # type: ignore[index]  # checked above

    plan: _Plan = []
    size = sum(bytesize(key) + (value.size() if type(value) is DynamoType else bytesize(str(value)))
               for key, value in attrs.items())
    definitions = table.attr or []
    for action, target in zip(shape.actions, targets, strict=True):
        source = action.source
        if action.kind == "REMOVE":
            plan.append((target, None))
            continue
        if action.kind == "ADD":
            assert isinstance(source, _Value)
            added = operand(source)
            existing = attrs.get(target, DynamoType({"N": "0"}))
            if added is None or added.type != "N" or existing.type != "N":
                return None
            new: DynamoType | None = existing + added
        elif isinstance(source, _IfNotExists):
            default = operand(source.default)
            current = operand(source.path)
            new = current if current is not None else default
        elif isinstance(source, _Arithmetic):
            left, right = operand(source.left), operand(source.right)
            if left is None or right is None or left.type != "N" or right.type != "N":
                return None
            new = left + right if source.operator == "+" else left - right
        else:
            assert source is not None
            new = operand(source)
        if new is None or _is_empty(new):
            return None
        if action.kind == "SET" and any(definition["AttributeName"] == action.target.raw
                                        and definition["AttributeType"] != new.type for definition in definitions):
            return None
        size += bytesize(target) + new.size()
        plan.append((target, new))
    if size > MAX_ITEM_SIZE:
        return None
    return plan


def _values_are_plain(values: dict[str, Any] | None, shape: _Shape) -> bool:
    """Every value the expression uses is one typed, non-empty attribute value."""
    if values is None:
        return not shape.values
    for placeholder in shape.values:
        value = values.get(placeholder)
        if not isinstance(value, dict) or len(value) != 1:
            return False
        if _is_empty(DynamoType(value)):
            return False
    return True


def update_item(self: DynamoDBBackend, table_name: str, key: dict[str, dict[str, Any]], update_expression: str,
                expression_attribute_names: dict[str, Any], expression_attribute_values: dict[str, Any],
                attribute_updates: dict[str, Any] | None = None, expected: dict[str, Any] | None = None,
                condition_expression: str | None = None,
                return_values_on_condition_check_failure: str | None = None) -> Item:
    """moto's DynamoDBBackend.update_item; for an expression of a known shape, applied without moto's
    validator and executor when nothing could make them raise (see above)."""
    def moto() -> Item:
        return moto_update_item(
            self, table_name, key, update_expression=update_expression,
            expression_attribute_names=expression_attribute_names,
            expression_attribute_values=expression_attribute_values, attribute_updates=attribute_updates,
            expected=expected, condition_expression=condition_expression,
            return_values_on_condition_check_failure=return_values_on_condition_check_failure)

    if not isinstance(update_expression, str) or not update_expression or attribute_updates or expected:
        return moto()
    found = shape(update_expression)
    if found is None or not isinstance(key, dict):
        return moto()
    try:
        table = self.get_table(table_name)
    except Exception:  # noqa: BLE001 - moto's answer for an unknown table
        return moto()
    if table.hash_key_attr not in key or (table.range_key_attr is not None) != (table.range_key_attr in key):
        return moto()
    try:
        plain = _values_are_plain(expression_attribute_values, found)
    except Exception:  # noqa: BLE001 - whatever moto makes of them
        plain = False
    if not plain:
        return moto()  # outside any try: moto's error is the answer, never a reason to call moto again
    try:
        hash_value = DynamoType(key[table.hash_key_attr])
        range_value = DynamoType(key[table.range_key_attr]) if table.range_key_attr is not None else None
        item = table.get_item(hash_value, range_value)
        # a new item starts as its key attributes (moto puts them first), which no path of a plan touches
        attrs = item.attrs if item is not None else _key_attributes(table, hash_value, range_value)
        plan = _plan(found, table, attrs, expression_attribute_names, expression_attribute_values)
    except Exception:  # noqa: BLE001 - whatever moto makes of it
        return moto()
    if plan is None:
        return moto()

    # moto's own steps from here (its update_item, the validator and executor replaced by the plan; its
    # Expected check is left out, as `expected` is empty here, and so is its copy of the item for a table
    # without a stream, which only the stream record reads)
    orig_item = copy.deepcopy(item) if table.stream_shard is not None else None
    condition_op = create_condition_expression_parser(
        condition_expression, expression_attribute_names, expression_attribute_values).parse()
    if not condition_op.expr(item):
        if return_values_on_condition_check_failure == "ALL_OLD" and item is not None:
            raise ConditionalCheckFailed(item=item.to_json()["Attributes"])
        raise ConditionalCheckFailed
    if item is None:
        data: dict[str, Any] = {table.hash_key_attr: {hash_value.type: hash_value.value}}
        if range_value:
            data.update({table.range_key_attr: {range_value.type: range_value.value}})  # type: ignore[dict-item]  # as moto's
        table.put_item(data)
        item = table.get_item(hash_value, range_value)
        assert item is not None
    _apply(item, plan)
    if table.stream_shard is not None:
        table.stream_shard.add(orig_item, item)
    return item


def _key_attributes(table: Table, hash_value: DynamoType, range_value: DynamoType | None) -> dict[str, DynamoType]:
    attrs = {table.hash_key_attr: hash_value}
    if table.range_key_attr is not None and range_value is not None:
        attrs[table.range_key_attr] = range_value
    return attrs


def _apply(item: Item, plan: _Plan) -> None:
    attrs = item.attrs
    # the plan proved the item stays within moto's size limit: its per-assignment check would pass
    assign = dict.__setitem__ if type(attrs) is LimitedSizeDict else type(attrs).__setitem__
    for attribute, value in plan:
        if value is None:
            attrs.pop(attribute, None)
        else:
            assign(attrs, attribute, value)


PATCHES = ((queries, "_original_update_item", update_item),)
