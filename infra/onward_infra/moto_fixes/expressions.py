"""Update expressions. Each update of a TransactWriteItems (and each UpdateItem) had moto parse its update
expression twice (the request's validation parses it to list the names it uses, then
`DynamoDBBackend.update_item` parses it again), deep-copy the parsed tree (the validator works on a copy),
and walk the copy with ten validation passes, each of which looked up its map of node types again at every
node: about a third of a transaction's time in moto.

- `make`: the parsed tree of each expression string is kept (successful parses only: an invalid expression
  is parsed again each time, and raises moto's own error each time). In moto 5.2.5 every user of a parsed
  tree only reads it (`find_clauses`) or gives it to the validator, which copies it before changing
  anything; a kept tree is never changed.
- `Validator.__init__`: the validator's copy of a kept tree is unpickled from a pickle of it taken once,
  instead of `copy.deepcopy` (several times cheaper for these trees of ~25 nodes). Pickle and deepcopy
  rebuild such a tree the same way (each node's `__dict__`, shared nodes shared, parents included); the
  first time a tree is kept, its unpickled copy is compared with its deep copy, node by node, and a tree for
  which they differ in anything (or that does not pickle) is deep-copied as before.
- `DepthFirstTraverser.traverse`: the same depth-first walk, processing the same nodes in the same order,
  with the traverser's map of node types read once per walk rather than at every node (every traverser in
  moto 5.2.5 returns a map literal) and `isinstance` checks against moto's abstract node classes memoized
  per node type. A traverser overriding any step of the walk is walked by moto's own code.
- `Node.find_clauses` (run by two of the passes at every clause node): the same search, its `isinstance`
  checks memoized per node type.
- `names_used`: the `#name` placeholders of an update expression, as TransactWriteItems' validation lists
  them (`find_clauses([ExpressionAttributeName])` over its tree), kept per expression string.
"""

from __future__ import annotations

import copy
import inspect
import pickle
from collections.abc import Callable
from typing import Any

from moto.dynamodb.parsing.ast_nodes import (  # type: ignore[attr-defined]  # untyped
    DepthFirstTraverser,
    Expression,
    ExpressionAttributeName,
    Node,
    UpdateExpressionFunction,
)
from moto.dynamodb.parsing.expressions import UpdateExpressionParser  # type: ignore[attr-defined]  # untyped
from moto.dynamodb.parsing.validators import Validator

from onward_infra.moto_fixes.expression_cache import ExpressionCache

_ATOMS = (str, int, float, bool, type(None))

_original_make = inspect.getattr_static(UpdateExpressionParser, "make")
_original_traverse = DepthFirstTraverser.traverse

# (parser class, expression) -> its parsed tree; id(tree) -> (tree, its pickle, or None: deep-copy it). A tree
# and its pickle are kept together and, both caches having one bound and one rule, dropped together.
_parsed: ExpressionCache[tuple[type, str], Any] = ExpressionCache()
_pickles: ExpressionCache[int, tuple[Any, bytes | None]] = ExpressionCache()
# expression -> its placeholders, in moto's order
_names_used: ExpressionCache[str, tuple[str, ...]] = ExpressionCache()


def make(cls: type[UpdateExpressionParser], expression_str: str) -> Any:
    """moto's parse of an update expression, kept per expression string."""
    if not isinstance(expression_str, str):
        return _original_make.__func__(cls, expression_str)
    key = (cls, expression_str)
    tree = _parsed.get(key)
    if tree is None:
        tree = _parsed.keep(key, _original_make.__func__(cls, expression_str))  # raises moto's error if invalid
        _pickles.keep(id(tree), (tree, _pickle_if_faithful(tree)))
    return tree


def forget() -> None:
    """Drop every kept tree."""
    _parsed.clear()
    _pickles.clear()
    _names_used.clear()


def names_used(expression_str: str) -> list[str]:
    """The `#name` placeholders of an update expression, in the order moto's search finds them (a fresh
    list); raises moto's error for an invalid expression."""
    found = _names_used.get(expression_str) if isinstance(expression_str, str) else None
    if found is None:
        tree = UpdateExpressionParser.make(expression_str)
        clauses = tree.find_clauses([ExpressionAttributeName])
        found = tuple(clause.get_attribute_name_placeholder() for clause in clauses)
        if isinstance(expression_str, str):
            _names_used.keep(expression_str, found)
    return list(found)


def _pickle_if_faithful(tree: Any) -> bytes | None:
    """A pickle of the tree whose unpickled copies are the tree's deep copies, or None."""
    try:
        pickled = pickle.dumps(tree, protocol=pickle.HIGHEST_PROTOCOL)
        if _same_shape(pickle.loads(pickled), copy.deepcopy(tree), {}, {}):
            return pickled
    except Exception:  # noqa: BLE001 - anything that does not pickle is deep-copied
        return None
    return None


def _same_shape(a: Any, b: Any, seen_a: dict[int, int], seen_b: dict[int, int]) -> bool:
    """Whether two object graphs are the same: same types, equal atoms, same sharing (parents included)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, _ATOMS):
        return bool(a == b)
    # sharing: the n-th distinct object met in one graph is the n-th met in the other
    if (id(a) in seen_a) or (id(b) in seen_b):
        return seen_a.get(id(a)) == seen_b.get(id(b))
    seen_a[id(a)] = seen_b[id(b)] = len(seen_a)
    if type(a) is list:
        return len(a) == len(b) and all(_same_shape(x, y, seen_a, seen_b) for x, y in zip(a, b, strict=True))
    if isinstance(a, Node):
        state_a, state_b = vars(a), vars(b)
        return list(state_a) == list(state_b) and all(
            _same_shape(state_a[name], state_b[name], seen_a, seen_b) for name in state_a)
    return False  # anything else: not known to copy alike


def _copy_tree(expression: Any) -> Any:
    kept = _pickles.get(id(expression))
    if kept is not None and kept[0] is expression and kept[1] is not None:
        return pickle.loads(kept[1])
    return copy.deepcopy(expression)


def validator_init(self: Validator, expression: Any, expression_attribute_names: dict[str, str],
                   expression_attribute_values: dict[str, dict[str, Any]], item: Any, table: Any) -> None:
    """moto's Validator.__init__, its copy of a kept tree unpickled (see above)."""
    self.expression_attribute_names = expression_attribute_names
    self.expression_attribute_values = expression_attribute_values
    self.item = item
    self.table = table
    self.processors = self.get_ast_processors()
    self.node_to_validate = _copy_tree(expression)


_descends: dict[type, bool] = {}


def find_clauses(self: Any, clause_types: list[type]) -> list[Any]:
    """moto's Node.find_clauses, its two `isinstance` checks against abstract node classes memoized per type."""
    clauses = []
    for child in self.children or []:
        child_type = type(child)
        if child_type in clause_types:
            clauses.append(child)
            continue
        descends = _descends.get(child_type)
        if descends is None:
            descends = _descends[child_type] = isinstance(child, Expression | UpdateExpressionFunction)
        if descends:
            clauses.extend(child.find_clauses(clause_types))
    return clauses


_WALK_STEPS = ("traverse", "traverse_node_recursively", "nodes_to_be_processed", "process")
_is_node: dict[type, bool] = {}


def _walks_as_moto(kind: type) -> bool:
    return all(getattr(kind, step) is getattr(DepthFirstTraverser, step) for step in _WALK_STEPS)


def traverse(self: Any, node: Any) -> Any:
    """moto's DepthFirstTraverser.traverse: the same walk, with lookups done once (see above)."""
    kind = type(self)
    if not _walks_as_moto(kind):
        return _original_traverse(self, node)
    processing_map = self._processing_map()
    targets = tuple(processing_map)  # nodes_to_be_processed()
    pre_processing: Callable[[Any, int], None] | None = None
    if kind.pre_processing_of_child is not DepthFirstTraverser.pre_processing_of_child:  # the base's does nothing
        pre_processing = self.pre_processing_of_child
    processors: dict[type, Callable[[Any], Any] | None] = {}

    def processor_of(node: Any) -> Callable[[Any], Any] | None:
        node_type = type(node)
        if node_type in processors:
            return processors[node_type]
        found = None
        if isinstance(node, targets):
            # process(): the first processor whose class the node is an instance of
            found = next(processor for class_key, processor in processing_map.items() if isinstance(node, class_key))
        processors[node_type] = found
        return found

    def visit(node: Any, child_id: int) -> Any:
        node_type = type(node)
        is_node = _is_node.get(node_type)
        if is_node is None:
            is_node = _is_node[node_type] = isinstance(node, Node)
        if not is_node:
            return node
        parent_node = node.parent
        if node.children is not None:
            for i, child_node in enumerate(node.children):
                if pre_processing is not None:
                    pre_processing(node, i)
                visit(child_node, i)
        process = processor_of(node)
        if process is not None:
            node = process(node)
            node.parent = parent_node
            if parent_node:
                parent_node.children[child_id] = node
        return node

    return visit(node, -1)


PATCHES = (
    (UpdateExpressionParser, "make", classmethod(make)),
    (Validator, "__init__", validator_init),
    (DepthFirstTraverser, "traverse", traverse),
    (Node, "find_clauses", find_clauses),
)
