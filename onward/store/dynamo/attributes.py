"""Plain Python values <-> DynamoDB attribute values (numbers as Decimal on the wire, int/float here)."""

from __future__ import annotations

import json
import re
from decimal import Decimal
from typing import Any

from boto3.dynamodb.types import TypeDeserializer, TypeSerializer

Item = dict[str, Any]  # an item in DynamoDB's wire format: {"name": {"S": "..."}}

_serializer = TypeSerializer()
_deserializer = TypeDeserializer()


def _plain(value: Any) -> Any:
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, dict):
        return {key: _plain(inner) for key, inner in value.items()}
    if isinstance(value, list | set | tuple):
        return [_plain(inner) for inner in value]
    return value


def _number(text: str) -> int | Decimal:
    """An integer as DynamoDB takes it: 10**40 has one significant digit, but boto3's serializer refuses its
    41-digit coefficient unless it is normalized."""
    if len(text.lstrip("-")) <= 38:
        return int(text)
    sign, digits, exponent = Decimal(text).as_tuple()
    assert isinstance(exponent, int)  # "n", "N" or "F" only for NaN and infinities; `text` is an integer
    kept = "".join(map(str, digits)).rstrip("0")  # exact: Decimal.normalize() would round to 28 digits
    return Decimal((sign, tuple(map(int, kept or "0")), exponent + len(digits) - len(kept or "0")))


def to_attribute(value: Any) -> dict[str, Any]:
    """One JSON-compatible value as a DynamoDB attribute value (floats travel as Decimal). Check values from
    outside with onward.domain.documents.check_storable first: this raises on what DynamoDB cannot hold."""
    try:
        return _exact(value)
    except _NotExact:
        pass
    attribute: dict[str, Any] = _serializer.serialize(
        json.loads(json.dumps(value), parse_float=Decimal, parse_int=_number))
    return attribute


class _NotExact(Exception):
    """A value `_exact` leaves to the JSON round trip and boto3's serializer."""


def _exact(value: Any) -> dict[str, Any]:
    """What the JSON round trip and boto3's serializer make of a value built of exactly str, bool, int of at
    most 38 digits, None, str-keyed dict and list or tuple (the rows the platform writes), without them:
    they were most of a job's client CPU outside the SDK. Anything else raises _NotExact."""
    kind = type(value)
    if kind is str:
        return {"S": value}
    if kind is bool:
        return {"BOOL": value}
    if kind is int:
        text = str(value)
        if len(text) - (text[0] == "-") > 38:
            raise _NotExact
        return {"N": text}
    if value is None:
        return {"NULL": True}
    if kind is dict:
        members = {}
        for key, member in value.items():
            if type(key) is not str:
                raise _NotExact
            members[key] = _exact(member)
        return {"M": members}
    if kind is list or kind is tuple:
        return {"L": [_exact(member) for member in value]}
    raise _NotExact


def to_item(values: dict[str, Any]) -> Item:
    """A dict of JSON-compatible values as a DynamoDB item; None values are left out."""
    return {name: to_attribute(value) for name, value in values.items() if value is not None}


def from_item(item: Item) -> dict[str, Any]:
    """A DynamoDB item as plain values (numbers int, or float when not whole; sets as lists)."""
    return {name: from_attribute(value) for name, value in item.items()}


def from_attribute(attribute: dict[str, Any]) -> Any:
    """One attribute value as a plain value: what boto3's deserializer then `_plain` make of it."""
    try:
        return _exact_value(attribute)
    except _NotExact:
        return _plain(_deserializer.deserialize(attribute))


_INTEGER = re.compile(r"-?[0-9]{1,38}")  # what Decimal reads exactly in DynamoDB's context and _plain makes an int


def _exact_value(attribute: Any) -> Any:
    """The inverse of `_exact`: an attribute value built of S, N (an integer of at most 38 digits), BOOL,
    NULL, M and L as plain values, without boto3's deserializer and its Decimals; _NotExact otherwise."""
    if type(attribute) is not dict or len(attribute) != 1:
        raise _NotExact
    ((kind, inner),) = attribute.items()
    if kind == "S" or kind == "BOOL":
        return inner
    if kind == "N":
        if type(inner) is not str or not _INTEGER.fullmatch(inner):
            raise _NotExact
        return int(inner)
    if kind == "NULL":
        return None
    if kind == "M" and type(inner) is dict:
        return {name: _exact_value(member) for name, member in inner.items()}
    if kind == "L" and type(inner) is list:
        return [_exact_value(member) for member in inner]
    raise _NotExact


def tenant_string_key(value: object, fields: frozenset[str], tenant_id: str) -> Item | None:
    """`value` as a key of string attributes (a listing's page position handed back by a caller): exactly
    `fields`, each {"S": <str>}, its `tenant_id` the one given; None for anything else."""
    if not (isinstance(value, dict) and set(value) == fields):
        return None
    if not all(isinstance(v, dict) and set(v) == {"S"} and isinstance(v["S"], str) for v in value.values()):
        return None
    return value if value["tenant_id"]["S"] == tenant_id else None
