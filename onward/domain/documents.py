"""What a JSON document must be for DynamoDB to store it as a map attribute (pure).

Params and results travel as JSON and are stored as DynamoDB maps, so they must fit DynamoDB's rules, not
only JSON's. A value that breaks one is refused at the edge with its location, before anything is written:
stored anyway, it would fail the write (a 500 for a create; for a result, no report and a lapsed lease) or,
where an emulator accepts it, poison every consumer of the stream record that carries it.

The rules (DynamoDB's limits, docs: "Service, account, and table quotas" and "Supported data types"):
- numbers: at most 38 significant digits, magnitude 0 or from 1e-130 to below 1e126; no NaN or Infinity;
- strings (and map keys): valid Unicode, so encodable as UTF-8 (no lone surrogates); map keys not empty;
- nesting: at most 32 levels of lists and maps, counting the attribute itself as level 1.

A caller's document (a job's params) must also come back as it was sent, to the caller and to the handler
(`exact_problems`, `check_exact`): DynamoDB has one number type, so a float with no fraction (2.0, 1e20, -0.0)
would come back an int, and is refused instead. Read the caller's JSON with `parse_json_float`, so that a
literal a float cannot hold (1e-400 parses to 0.0) is judged by its own value, not stored as 0.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterator
from decimal import Decimal, InvalidOperation
from typing import Any

from onward.domain.errors import UnstorableValue

MAX_DEPTH = 32
MAX_DIGITS = 38
MIN_MAGNITUDE = Decimal("1e-130")
MAX_MAGNITUDE = Decimal("1e126")

Location = tuple[str | int, ...]


def parse_json_float(text: str) -> float | Decimal:
    """json.loads' parse_float: the float of a JSON number with a fraction or an exponent, or, where a float
    cannot hold it (a value that is not zero but parses to 0.0, or past a float's range), its exact Decimal,
    so that it is judged by what the caller wrote (outside DynamoDB's range, either way)."""
    value = float(text)
    if (value == 0.0 or math.isinf(value)) and not Decimal(text).is_zero():
        return Decimal(text)
    return value


def storable_problems(value: Any, *, depth: int = 1) -> Iterator[tuple[Location, str]]:
    """Each place in `value` DynamoDB cannot store, with the reason; `depth` is the nesting level of `value`
    itself (1: it is a top-level attribute)."""
    return _problems(value, depth, number_problem)


def exact_problems(value: Any, *, depth: int = 1) -> Iterator[tuple[Location, str]]:
    """storable_problems, and each number DynamoDB would give back as another value or type (whole floats):
    what a caller's document must pass to come back as it was sent."""
    return _problems(value, depth, exact_number_problem)


def _problems(value: Any, depth: int, judge: Callable[[Any], str | None]) -> Iterator[tuple[Location, str]]:
    stack: list[tuple[Location, Any, int]] = [((), value, depth)]
    while stack:  # iterative: a document of any depth is judged without recursion
        where, current, level = stack.pop()
        if isinstance(current, dict | list) and level > MAX_DEPTH:
            yield where, f"nested deeper than DynamoDB's {MAX_DEPTH} levels"
            continue
        if isinstance(current, dict):
            for key, inner in current.items():
                if not isinstance(key, str):
                    yield (*where, str(key)), "map keys must be strings"
                elif key == "":
                    yield (*where, key), "an empty map key (DynamoDB refuses empty attribute names)"
                elif not _encodable(key):
                    yield (*where, key.encode("utf-8", "backslashreplace").decode()), \
                        "a map key that is not valid Unicode (a lone surrogate)"
                else:
                    stack.append(((*where, key), inner, level + 1))
        elif isinstance(current, list | tuple):  # a tuple is written as a JSON array, as json.dumps does
            stack.extend(((*where, index), inner, level + 1) for index, inner in enumerate(current))
        elif isinstance(current, str):
            if not _encodable(current):
                yield where, "a string that is not valid Unicode (a lone surrogate)"
        elif isinstance(current, bool) or current is None:
            continue
        elif isinstance(current, int | float | Decimal):
            reason = judge(current)
            if reason is not None:
                yield where, reason
        else:
            yield where, f"a {type(current).__name__} is not a JSON value"


def number_problem(number: float | Decimal) -> str | None:
    """Why DynamoDB cannot store this number, None when it can."""
    if isinstance(number, float) and not math.isfinite(number):
        return "NaN and Infinity are not numbers DynamoDB can store"
    try:
        exact = Decimal(number) if isinstance(number, int) else Decimal(repr(number)) if isinstance(
            number, float) else number
    except (InvalidOperation, ValueError):
        return "not a number DynamoDB can store"
    if not exact.is_finite():
        return "NaN and Infinity are not numbers DynamoDB can store"
    if exact.is_zero():
        return None
    digits = len("".join(map(str, exact.as_tuple().digits)).strip("0"))  # exact: no context rounds it
    if digits > MAX_DIGITS:
        return f"{digits} significant digits; DynamoDB keeps at most {MAX_DIGITS}"
    magnitude = abs(exact)
    if magnitude >= MAX_MAGNITUDE or magnitude < MIN_MAGNITUDE:
        return "a magnitude outside DynamoDB's range (1e-130 to below 1e126)"
    return None


def exact_number_problem(number: float | Decimal) -> str | None:
    """Why DynamoDB cannot store this number, or would give back another value or type; None when it keeps it."""
    unstorable = number_problem(number)
    if unstorable is None and isinstance(number, float) and number.is_integer():
        return (f"{number!r} is a float with no fraction: DynamoDB's one number type would give it back as an "
                "integer; send it as one (no `.0`, no exponent), or as a string")
    return unstorable


def check_storable(value: Any, where: str = "value", *, depth: int = 1) -> None:
    """Raise UnstorableValue naming the first place in `value` DynamoDB cannot store, and why."""
    _raise_first(storable_problems(value, depth=depth), where)


def check_exact(value: Any, where: str = "value", *, depth: int = 1) -> None:
    """Raise UnstorableValue naming the first place in a caller's `value` that DynamoDB cannot store or would
    give back changed, and why."""
    _raise_first(exact_problems(value, depth=depth), where)


def _raise_first(problems: Iterator[tuple[Location, str]], where: str) -> None:
    for location, reason in problems:
        path = "".join(f"[{part}]" if isinstance(part, int) else f".{part}" if part.isidentifier()
                       else f"[{json.dumps(part)}]" for part in location)
        raise UnstorableValue(f"{where}{path}: {reason}")


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def json_size(value: Any) -> int:
    """Bytes of the compact JSON encoding: what a caller's params or result will cost in an item."""
    return len(json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode())
