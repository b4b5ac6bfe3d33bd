"""A lean JSON codec for boto3 clients of the embedded endpoint (ONWARD_CLIENT_WRAPPER, onward_infra.lean_client).

botocore serializes a request of the JSON protocol (DynamoDB, DynamoDB Streams, Kinesis) by walking the
parameters shape by shape into a new dict before `json.dumps`, and parses an answer by walking the loaded
JSON shape by shape again: every AttributeValue of a Query's rows goes through a dozen method lookups. With
the HTTP transport lean (onward_infra.lean_client.http), these two led what botocore still cost the platform's
processes.
Most requests and answers need none of it: what botocore converts are blobs (base64), timestamps and renamed
members; what it drops are nulls and keys the model does not know. Client CPU per call on the embedded
endpoint, without parameter validation (medians of 3 alternating runs of 2,000): a Query of 8 job rows
1.62 -> 0.96 ms, a GetItem of a missing key 0.60 -> 0.48, a 4-action TransactWriteItems 0.98 -> 0.88.

`use_lean_json(client)` keeps botocore's contract exactly, and uses its own code whenever the lean one could
differ:

- **Requests**: `json.dumps(parameters)` is the body when it is provably the bytes botocore's JSONSerializer
  writes: every value one json dumps natively (bytes, datetime, Decimal... bail out through `default=`; NaN
  and infinities through `allow_nan=False`), and no key in the dumped text that names a member botocore
  converts (`"B": `, an AttributeValue's binary: see `_RequestPlan.converted_keys` for why a match can only be
  a key). Parameters botocore's validator did not check (`parameter_validation=False`) are walked first
  for what its serializer would raise on or reshape: an unknown member, a container of the wrong type.
- **Answers** (status < 300): `json.loads(body)` is the result when the body holds no `null` and each
  structure level (AttributeValues included, checked a map at a time with set operations) holds only
  members botocore keeps as they are; structure levels are put in the model's member order as botocore
  builds them. ResponseMetadata is added as botocore adds it.

Anything else (errors, event streams, host prefixes, the query-compatible trait, tagged unions) goes through
botocore's serializer and parser, as it would without this module.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any, Final

from botocore.model import OperationModel, Shape
from botocore.serialize import JSONSerializer
from botocore.utils import lowercase_dict
from botocore.validate import ParamValidationDecorator

PROTOCOL: Final = "json"
CONVERTED_TYPES: Final = frozenset({"blob", "timestamp"})  # what botocore's JSON serializer and parser convert
FLOAT_TYPES: Final = frozenset({"float", "double"})


class _NotPlain(Exception):
    """botocore's own serializer or parser is needed for this request or answer."""


def _refuse(_: Any) -> Any:
    raise _NotPlain


def _converts(shape: Shape) -> bool:
    """Whether botocore converts a value of `shape` itself, or inside its lists and maps (a structure's members
    are looked at by their own names)."""
    if shape.type_name in CONVERTED_TYPES:
        return True
    if shape.type_name == "list":
        return _converts(shape.member)
    if shape.type_name == "map":
        return _converts(shape.value)
    return False


def _structures(shape: Shape, seen: dict[str, Shape] | None = None) -> dict[str, Shape]:
    """Every structure shape reachable from `shape` (itself included), by name: the model's recursive shapes
    (AttributeValue's M and L) are visited once."""
    seen = {} if seen is None else seen
    if shape.type_name == "structure":
        if shape.name in seen:
            return seen
        seen[shape.name] = shape
        for member in shape.members.values():
            _structures(member, seen)
    elif shape.type_name == "list":
        _structures(shape.member, seen)
    elif shape.type_name == "map":
        _structures(shape.value, seen)
    return seen


def _renamed(member: Shape, name: str) -> bool:
    serialized_name: str = member.serialization.get("name", name)
    return serialized_name != name


# ------------------------------------------------------------------------------------------------------ walks

_DICT: Final = frozenset({dict})


class _Walk:
    """What botocore's serializer or parser needs of the values of one shape, checked for all the values of
    one level at once (all AttributeValues of a Query's rows in a few set operations, then their M and L
    values): `many` raises _NotPlain where botocore would raise or give something else than the values as
    they are, and puts structures in the model's member order in place where botocore's parser would."""

    def many(self, values: list[Any]) -> None:
        """Check (and order) `values`, all of this walk's shape."""


_PLAIN: Final = _Walk()  # strings, numbers, booleans, documents: botocore passes them through as they are


class _Refused(_Walk):
    """A shape botocore converts (a blob, a timestamp in an answer): only its absence is plain."""

    def many(self, values: list[Any]) -> None:
        if values:
            raise _NotPlain


class _Typed(_Walk):
    """Values of exactly these types."""

    def __init__(self, types: Iterable[type]) -> None:
        self.types = frozenset(types)

    def many(self, values: list[Any]) -> None:
        if not set(map(type, values)) <= self.types:
            raise _NotPlain


# A float member of a request: botocore's serializer calls math.isnan on it, which raises on anything but a
# number (a Decimal, made a float first, makes json bail out anyway).
_NUMBERS: Final = _Typed({int, float, bool})


class _List(_Walk):
    """A list of `types` (botocore's serializer iterates anything; its parser a dict's keys, a string's
    characters: neither is what json gives), its items walked together."""

    def __init__(self, types: Iterable[type], item: _Walk) -> None:
        self.types = frozenset(types)
        self.item = item

    def many(self, values: list[Any]) -> None:
        if not set(map(type, values)) <= self.types:
            raise _NotPlain
        if self.item is not _PLAIN:
            self.item.many([member for value in values for member in value])


class _Map(_Walk):
    """A dict (botocore calls `items` on it), its values walked together."""

    def __init__(self, item: _Walk) -> None:
        self.item = item

    def many(self, values: list[Any]) -> None:
        if not set(map(type, values)) <= _DICT:
            raise _NotPlain
        if self.item is not _PLAIN:
            self.item.many([member for value in values for member in value.values()])


class _Structure(_Walk):
    """A dict of the members botocore passes through as they are (its serializer raises KeyError on an
    unknown member, its parser drops it), the members that have a walk walked together; `position`: put in
    the model's member order, as botocore's parser builds a structure (None: requests keep their order)."""

    def __init__(self) -> None:
        self.refused = False  # a tagged union in an answer: botocore checks its members and may replace it
        self.kept: frozenset[str] = frozenset()
        self.walks: dict[str, _Walk] = {}
        self.position: dict[str, int] | None = None

    def many(self, values: list[Any]) -> None:
        if not values:
            return
        if self.refused or not set(map(type, values)) <= _DICT:
            raise _NotPlain
        names = set().union(*values)
        if not names <= self.kept:
            raise _NotPlain
        if self.position is not None and max(map(len, values)) > 1:  # a dict of one key is in order
            for value in values:
                self._in_member_order(value)
        for name in names & self.walks.keys():
            self.walks[name].many([value[name] for value in values if name in value])

    def _in_member_order(self, value: dict[str, Any]) -> None:
        assert self.position is not None
        names = list(value)
        ordered = sorted(names, key=self.position.__getitem__)
        if names != ordered:
            members = [(name, value[name]) for name in ordered]
            value.clear()
            value.update(members)


class _Walks:
    """The walks of one operation's input (`answers` False) or output shapes, built once per structure name:
    the model's recursive shapes (AttributeValue's M and L) refer to their own walk."""

    def __init__(self, *, answers: bool) -> None:
        self.answers = answers
        self._structures: dict[str, _Structure] = {}

    def of(self, shape: Shape) -> _Walk:
        kind = shape.type_name
        if kind == "structure":
            return _PLAIN if shape.is_document_type else self._structure(shape)
        if kind == "list":
            return _List({list} if self.answers else {list, tuple}, self.of(shape.member))
        if kind == "map":
            return _Map(self.of(shape.value))
        if kind in CONVERTED_TYPES:  # in a request, found by its member's name in the dumped text instead
            return _Refused() if self.answers else _PLAIN
        if kind in FLOAT_TYPES and not self.answers:
            return _NUMBERS
        return _PLAIN

    def _structure(self, shape: Shape) -> _Structure:
        known = self._structures.get(shape.name)
        if known is not None:
            return known
        walk = self._structures[shape.name] = _Structure()
        members: dict[str, Shape] = shape.members
        if self.answers:
            walk.refused = bool(shape.is_tagged_union)
            walk.position = {name: index for index, name in enumerate(members)}
            members = {name: member for name, member in members.items() if not _renamed(member, name)}
        walk.kept = frozenset(members)
        walks = {name: self.of(member) for name, member in members.items()}
        walk.walks = {name: member for name, member in walks.items() if member is not _PLAIN}
        return walk


# ---------------------------------------------------------------------------------------------------- requests


class _RequestPlan:
    """What an operation's requests need, worked out once from its model."""

    def __init__(self, operation: OperationModel) -> None:
        metadata = operation.metadata
        self.target = f"{metadata['targetPrefix']}.{operation.name}"
        self.content_type = f"application/x-amz-json-{metadata['jsonVersion']}"
        self.method: str = operation.http.get("method", JSONSerializer.DEFAULT_METHOD)
        shape = operation.input_shape
        # botocore adds to the request what json.dumps cannot: a host prefix, the query-compatible header
        self.lean = (shape is not None and not (operation.endpoint or {}).get("hostPrefix")
                     and not operation.service_model.is_query_compatible)
        # The keys whose values botocore converts or renames, as json.dumps writes a key (ensure_ascii, the
        # default separators): `"B": `. Inside a dumped string every `"` is escaped (`\"`), so a `"` that
        # follows `B` closes a string literal, and a literal followed by `: ` is a key. A key ending in `"B`
        # matches too (its literal is `"...\"B": `): a false positive only costs botocore's serializer.
        names: set[str] = set()
        for structure in (_structures(shape).values() if shape is not None else ()):
            for name, member in structure.members.items():
                if _converts(member) or _renamed(member, name):
                    names.add(name)
        self.converted_keys = tuple(sorted(f'"{name}": ' for name in names))
        self.walk = _Walks(answers=False).of(shape) if shape is not None else _PLAIN


class LeanJSONSerializer:
    """botocore's JSONSerializer (`fallback`), writing the body with one `json.dumps` of the parameters when
    that gives the same bytes (module docstring). `validated`: botocore's validator checked the parameters
    before (its ParamValidationDecorator wraps this one), so they need no walk of their own."""

    def __init__(self, fallback: JSONSerializer, *, validated: bool) -> None:
        self.fallback = fallback
        self.validated = validated
        self._plans: dict[str, _RequestPlan] = {}

    def serialize_to_request(self, parameters: Any, operation_model: OperationModel) -> dict[str, Any]:
        """The request dict botocore's serializer returns for these parameters."""
        plan = self._plans.get(operation_model.name)
        if plan is None:
            plan = self._plans[operation_model.name] = _RequestPlan(operation_model)
        body = self._body(parameters, plan) if plan.lean else None
        if body is None:
            request: dict[str, Any] = self.fallback.serialize_to_request(parameters, operation_model)
            return request
        return {
            "url_path": "/",
            "query_string": "",
            "method": plan.method,
            "headers": {"X-Amz-Target": plan.target, "Content-Type": plan.content_type},
            "body": body,
        }

    def _body(self, parameters: Any, plan: _RequestPlan) -> bytes | None:
        try:
            if not self.validated:
                plan.walk.many([parameters])
            text = json.dumps(parameters, allow_nan=False, default=_refuse)
        except Exception:  # noqa: BLE001 - whatever json or a walk refuses, botocore decides (or raises)
            return None
        if any(key in text for key in plan.converted_keys):
            return None
        return text.encode("utf-8")


# ----------------------------------------------------------------------------------------------------- answers


class LeanJSONParser:
    """botocore's parser of the JSON protocol (made by `factory`), answering a success with `json.loads` when
    that gives what botocore's parser returns (module docstring)."""

    def __init__(self, factory: Any) -> None:
        self.factory = factory
        self._walks: dict[Shape, _Walk | None] = {}  # None: botocore parses this output shape

    def parse(self, response: dict[str, Any], shape: Shape | None) -> Any:
        """What botocore's JSONParser.parse returns for this response dict and output shape."""
        if response["status_code"] < 300 and shape is not None:
            parsed = self._lean(response, shape)
            if parsed is not None:
                return parsed
        return self.factory.create_parser(PROTOCOL).parse(response, shape)

    def _walk(self, shape: Shape) -> _Walk | None:
        try:
            return self._walks[shape]
        except KeyError:
            pass
        lean = shape.type_name == "structure" and not (shape.event_stream_name
                                                       or shape.serialization.get("eventstream"))
        walk = self._walks[shape] = _Walks(answers=True).of(shape) if lean else None
        return walk

    def _lean(self, response: dict[str, Any], shape: Shape) -> dict[str, Any] | None:
        walk = self._walk(shape)
        body = response["body"]
        if walk is None or type(body) is not bytes or not body or b"null" in body:
            return None  # a null anywhere (the literal cannot be escaped) is a member botocore drops
        try:
            parsed: dict[str, Any] = json.loads(body.decode("utf-8"))
            walk.many([parsed])
        except (_NotPlain, ValueError, RecursionError):  # ValueError: not UTF-8 or not JSON
            return None
        _add_response_metadata(parsed, response)
        return parsed


def _add_response_metadata(parsed: dict[str, Any], response: dict[str, Any]) -> None:
    """ResponseMetadata as botocore's JSONParser and ResponseParser.parse add it, in their order."""
    headers = response["headers"]
    if "x-amzn-requestid" in headers:
        parsed.setdefault("ResponseMetadata", {})["RequestId"] = headers["x-amzn-requestid"]
    metadata = parsed.get("ResponseMetadata", {})
    metadata["HTTPStatusCode"] = response["status_code"]
    metadata["HTTPHeaders"] = lowercase_dict(headers)
    parsed["ResponseMetadata"] = metadata
    algorithm = response.get("context", {}).get("checksum", {}).get("response_algorithm")
    if algorithm:
        metadata["ChecksumAlgorithm"] = algorithm


class LeanParserFactory:
    """botocore's ResponseParserFactory (`factory`, shared by a session's clients) for one client's endpoint:
    its JSON parser is a LeanJSONParser, kept for the client's life (it caches per output shape)."""

    def __init__(self, factory: Any) -> None:
        self.factory = factory
        self._parser = LeanJSONParser(factory)

    def create_parser(self, protocol_name: str) -> Any:
        if protocol_name == PROTOCOL:
            return self._parser
        return self.factory.create_parser(protocol_name)


def use_lean_json(client: Any) -> Any:
    """Serialize `client`'s requests and parse its answers with the lean codec (module docstring); `client`,
    for chaining. Only for clients of the JSON protocol (DynamoDB, DynamoDB Streams, Kinesis): botocore offers
    no option for either, so the client's serializer and its endpoint's parser factory are replaced."""
    protocol = client.meta.service_model.resolved_protocol
    if protocol != PROTOCOL:
        raise ValueError(f"the lean JSON codec is for the JSON protocol, not {protocol}")
    # with parameter validation on, botocore's validator wraps the serializer: the lean one goes inside it
    decorator = client._serializer
    holder = decorator if isinstance(decorator, ParamValidationDecorator) else client
    serializer = holder._serializer
    if not isinstance(serializer, LeanJSONSerializer):
        if type(serializer) is not JSONSerializer:
            raise ValueError(f"the lean JSON codec wraps botocore's JSONSerializer, not {type(serializer).__name__}")
        holder._serializer = LeanJSONSerializer(serializer, validated=holder is not client)
    endpoint = client._endpoint
    if not isinstance(endpoint._response_parser_factory, LeanParserFactory):
        endpoint._response_parser_factory = LeanParserFactory(endpoint._response_parser_factory)
    return client
