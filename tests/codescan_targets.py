"""Which table, index or stream each SDK call of the reading can name, for tests/codescan.py: the values its
request's TableName, IndexName, StreamName/StreamARN (and RequestItems' keys, the Put/Update/... items of a
transaction) can take, followed through the AST from where the call is made back to where they come from.

A value is a resource the settings name (`settings.require("jobs_table")`), a literal ("overlaps"), or the stream
of a resource (`describe_table(TableName=t)["Table"]["LatestStreamArn"]`). An expression is followed through:

- names: a function's parameters (to every call in the reading's code that can pass them: `f(...)`, `m.f(...)`,
  `x.method(...)`, `Class(...)` for `__init__`, `partial(f, ...)`; a missing argument takes the default), the
  function's own assignments, `for` and comprehension targets (the elements of what they iterate), a lambda's
  parameter when the lambda is mapped (`map(lambda r: ..., requests)`), then the module's constants and the
  names it imports from other project modules (`IndexName=OVERLAPS_INDEX`);
- `self.attribute`: every assignment to it in the class's methods (and its project bases' and subclasses'), a
  class-level value, a dataclass or NamedTuple field (the constructor's argument), a property's returns;
- calls of project functions (their return values; where a request's dict is expected, a method's, by its name
  among the classes in reach), conditional expressions, `a or b`, f-strings of values that resolve to
  literals, dict literals with `**spread` (a request built in pieces), a filtered copy of a dict
  (`{k: v for k, v in d.items() if ...}`), a `**kwargs` parameter (the keywords its callers pass); a request
  rebuilt from an answer's UnprocessedKeys / UnprocessedItems names no table its first request did not.

A class no reached code builds gives its attributes no value (no instance, so none of its calls runs). Anything
else raises Unresolved, naming the place: the reading never guesses a target, so a role can be held to exactly
the tables and indexes its code names.
"""

from __future__ import annotations

import ast
import itertools

from tests.codescan_modules import Scope, Unresolved, _at, _identifier, _literal_argument, _requires
from tests.codescan_origins import TARGET_KEYS, Origins

Value = tuple[str, str]  # ("resource", "jobs_table"), ("literal", "overlaps"), ("stream", "outbox_table")
Shape = dict[str, frozenset[Value]]  # a request's keys of interest -> the values each can take
NAMES = frozenset({"resource", "literal"})  # what a table or a stream name can be
STREAMS = frozenset({"stream"})  # what a table's stream ARN can be


class Targets(Origins):
    """Reads the origins of a request's values: tables, indexes, streams (`values`), requests (`shapes`)."""

    def values(self, expr: ast.expr, scope: Scope) -> frozenset[Value]:
        found: set[Value] = set()
        for origin, where in self.origins(expr, scope):
            if isinstance(origin, ast.Constant) and isinstance(origin.value, str):
                found.add(("literal", origin.value))
            elif isinstance(origin, ast.Constant) and origin.value is None:
                continue
            elif isinstance(origin, ast.JoinedStr):
                found |= {("literal", text) for text in self._formatted(origin, where)}
            elif isinstance(origin, ast.Call) and _requires(origin):
                found.add(("resource", str(_literal_argument(origin))))
            elif self._stream_of(origin) is not None:
                described = self._stream_of(origin)
                assert described is not None
                found |= {("stream", name) for kind, name in self.values(described, where) if kind == "resource"}
            else:
                raise Unresolved(f"{_at(where, origin)} (not a literal, a setting or a stream)")
        return frozenset(found)

    @staticmethod
    def _stream_of(node: ast.expr) -> ast.expr | None:
        """`<client>.describe_table(TableName=t)["Table"]["LatestStreamArn"]` -> t."""
        if not (isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant)
                and node.slice.value == "LatestStreamArn" and isinstance(node.value, ast.Subscript)
                and isinstance(node.value.value, ast.Call) and _identifier(node.value.value.func) == "describe_table"):
            return None
        return next((k.value for k in node.value.value.keywords if k.arg == "TableName"), None)

    def _formatted(self, node: ast.JoinedStr, scope: Scope) -> list[str]:
        pieces: list[list[str]] = []
        for part in node.values:
            if isinstance(part, ast.Constant):
                pieces.append([str(part.value)])
            elif isinstance(part, ast.FormattedValue) and part.format_spec is None and part.conversion == -1:
                values = self.values(part.value, scope)
                if any(kind != "literal" for kind, _ in values):
                    raise Unresolved(f"{_at(scope, node)} (an f-string of more than literals)")
                pieces.append(sorted(text for _, text in values))
            else:
                raise Unresolved(f"{_at(scope, node)} (a formatted f-string)")
        return ["".join(combination) for combination in itertools.product(*pieces)]

    def shapes(self, expr: ast.expr, scope: Scope) -> list[Shape]:
        """The requests a dict expression can be, each as its TARGET_KEYS' values."""
        found: list[Shape] = []
        for origin, where in self.origins(expr, scope):
            copied = _copied(origin)
            returned = (self._method_returns(origin.func.attr) if isinstance(origin, ast.Call)
                        and isinstance(origin.func, ast.Attribute) else None)
            if copied is not None:
                found += self.shapes(copied, where)
            elif returned is not None:  # a request built by a method, `where.expression()`
                found += [shape for at, inner in returned for shape in self.shapes(at, inner)]
            elif isinstance(origin, ast.Dict):
                found += self._dict_shapes(origin.keys, origin.values, where)
            else:
                raise Unresolved(f"{_at(where, origin)} (not a request's dict)")
        return _unique(found)

    def _dict_shapes(self, keys: list[ast.expr | None], values: list[ast.expr], scope: Scope) -> list[Shape]:
        shapes: list[Shape] = [{}]
        for key, value in zip(keys, values, strict=True):
            if key is None:
                shapes = [{**shape, **spread} for shape in shapes for spread in self.shapes(value, scope)]
            elif isinstance(key, ast.Constant) and key.value in TARGET_KEYS:
                resolved = self.values(value, scope)
                shapes = [{**shape, str(key.value): resolved} for shape in shapes]
            elif isinstance(key, ast.Constant) and key.value == "RequestItems":
                resolved = self.keys(value, scope)
                shapes = [{**shape, "TableName": resolved} for shape in shapes]
        return _unique(shapes)

    def keys(self, expr: ast.expr, scope: Scope) -> frozenset[Value]:
        """The values the keys of a dict expression can take (RequestItems: table -> requests)."""
        found: set[Value] = set()
        for origin, where in self.origins(expr, scope):
            if _unprocessed(origin):
                continue
            if not isinstance(origin, ast.Dict):
                raise Unresolved(f"{_at(where, origin)} (not a dict of tables)")
            for key, value in zip(origin.keys, origin.values, strict=True):
                found |= self.keys(value, where) if key is None else self.values(key, where)
        return frozenset(found)

    def request(self, call: ast.Call, scope: Scope) -> list[Shape]:
        """The requests an SDK call can send: its keywords (and `**spread` dicts)."""
        return self._dict_shapes([None if k.arg is None else ast.Constant(k.arg) for k in call.keywords],
                                 [k.value for k in call.keywords], scope)


def _unique(shapes: list[Shape]) -> list[Shape]:
    seen: dict[tuple[tuple[str, frozenset[Value]], ...], Shape] = {}
    for shape in shapes:
        seen.setdefault(tuple(sorted(shape.items(), key=lambda item: item[0])), shape)
    return list(seen.values())


def call_accesses(targets: Targets, request: ast.Call, scope: Scope, action: str,
                  members: frozenset[str]) -> set[tuple[str, str, str]]:
    """(action, resource, part) for each target the request of an SDK call can name: part is "arn" (a table,
    a stream), "index/<name>" (a table's index) or "stream" (a table's stream); `members` are the operation's
    request members (botocore's model), which say what names its target."""
    found: set[tuple[str, str, str]] = set()
    place = f"{scope.module}:{request.lineno}"
    for shape in targets.request(request, scope):
        if {"TableName", "RequestItems"} & members:
            tables = named(shape, "TableName", NAMES, place)
            indexes = {name for kind, name in shape.get("IndexName", frozenset()) if kind == "literal"}
            if len(indexes) != len(shape.get("IndexName", frozenset())):
                raise Unresolved(f"{place}: an IndexName that is no literal: {sorted(shape['IndexName'])}")
            found |= ({(action, table, f"index/{index}") for table in tables for index in indexes} if indexes
                      else {(action, table, "arn") for table in tables})
        elif "StreamArn" in members:  # DynamoDB Streams: a table's stream
            found |= {(action, table, "stream") for table in named(shape, "StreamArn", STREAMS, place)}
        elif {"StreamName", "StreamARN"} & members:  # Kinesis
            streams = shape.get("StreamName", frozenset()) | shape.get("StreamARN", frozenset())
            found |= {(action, name, "arn") for name in named({"StreamName": streams}, "StreamName", NAMES, place)}
        elif "QueueUrl" in members:  # SQS: a queue the settings name
            found |= {(action, queue, "arn") for queue in named(shape, "QueueUrl", NAMES, place)}
        else:
            found.add((action, "*", "*"))
    return found


def named(shape: Shape, key: str, kinds: frozenset[str], place: str) -> set[str]:
    """The names `shape[key]` can take, each of one of `kinds` (a resource the settings name or a literal
    for a table or a stream, "stream" for a table's stream). An empty set: no path in reach gives the call a
    value (its object is never built there), so the call cannot run."""
    if key not in shape:
        raise Unresolved(f"{place}: sends no {key}")
    values = shape[key]
    if any(found not in kinds for found, _ in values):
        raise Unresolved(f"{place}: its {key} is {sorted(values)}; it must be one of {sorted(kinds)}")
    return {name for _, name in values}


def _unprocessed(node: ast.expr) -> bool:
    """`answer.get("UnprocessedKeys")` / `answer["UnprocessedItems"]`: DynamoDB hands back only tables the
    request named, so a request rebuilt from them names no new one."""
    keys = {"UnprocessedKeys", "UnprocessedItems"}
    if isinstance(node, ast.Subscript):
        return isinstance(node.slice, ast.Constant) and node.slice.value in keys
    return (isinstance(node, ast.Call) and _identifier(node.func) == "get" and bool(node.args)
            and isinstance(node.args[0], ast.Constant) and node.args[0].value in keys)


def _copied(node: ast.expr) -> ast.expr | None:
    """`{k: v for k, v in d.items() if ...}` -> d (a filtered copy holds none of the keys d lacks)."""
    if not (isinstance(node, ast.DictComp) and len(node.generators) == 1):
        return None
    generator = node.generators[0]
    target, source = generator.target, generator.iter
    if (isinstance(target, ast.Tuple) and len(target.elts) == 2 and all(isinstance(e, ast.Name) for e in target.elts)
            and isinstance(node.key, ast.Name) and isinstance(node.value, ast.Name)
            and [node.key.id, node.value.id] == [e.id for e in target.elts if isinstance(e, ast.Name)]
            and isinstance(source, ast.Call) and _identifier(source.func) == "items" and not source.args
            and isinstance(source.func, ast.Attribute)):
        return source.func.value
    return None
