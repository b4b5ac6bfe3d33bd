"""Item sizes. moto sizes an item (its 400 KB limit on every write, a Query's 1 MB page, a BatchGetItem's
16 MB answer) by calling `DynamoType.size()` on each of its values, which asks the value what it is by a
method call per type (is_number, is_set, is_list, is_map) and sizes each member of a map by wrapping it in
a new DynamoType first: about an eighth of the endpoint's CPU under load. And `LimitedSizeDict.__setitem__`
sizes the whole item again at each attribute put into it, so building an item (`Item.__init__`, every
PutItem) cost O(attributes x item).

`value_size` computes exactly what `DynamoType.size()` does, by the value's type, in one function per
container (strings and numbers inside a list, map or set sized inline), quirks included: a number counts the
characters of its text, a boolean (and NULL's True) 1, a string or binary its UTF-8 bytes (a binary value
received over the wire is its base64 text), a set its members sized as values of the member type, a map
its keys' UTF-8 bytes and its members sized as moto's fresh DynamoTypes wrapping them (see `_size`).
`DynamoType.size` and `Item.size` are replaced by it; `LimitedSizeDict.__setitem__` sizes the item with it
(O(item) per attribute, as moto's, without its per-node calls); `Item.__init__` keeps the running size of
the attributes put so far, O(item) in all, and raises ItemSizeTooLarge at the attribute where moto's does:
its keys are distinct and sizes are never negative, so the running total is the size moto recomputes.
"""

from __future__ import annotations

from typing import Any

from moto.dynamodb.exceptions import ItemSizeTooLarge
from moto.dynamodb.models.dynamo_type import DynamoType, Item, LimitedSizeDict
from moto.dynamodb.models.utilities import bytesize

MAX_ITEM_SIZE = 405_000  # moto's limit (LimitedSizeDict.__setitem__): an item larger than this is refused
_SET_MEMBER_TYPES = {"SS": "S", "NS": "N", "BS": "B"}


def value_size(value: DynamoType) -> int:
    """What moto's `value.size()` gives, for any type and nesting (see the module's docstring)."""
    return _size(value.type, value.value, False)


def _size(kind: str, value: Any, rewrapped: bool) -> int:
    """moto's size of a DynamoType of type `kind` holding `value`.

    `rewrapped`: reached through a map. moto sizes a map's member as `DynamoType(member)`, which wraps every
    member of the lists and maps below it again: a member there that is a plain {type: value} dict (not a
    DynamoType) is sized as that value, while reached only through lists, moto calls its size() (and fails as
    moto does)."""
    if kind == "S" and type(value) is str:
        return len(value) if value.isascii() else len(value.encode())
    if kind == "N":
        return len(str(value))
    if kind == "M":
        total = 0
        for key, member in value.items():
            total += len(key) if type(key) is str and key.isascii() else bytesize(key)
            typed = member if type(member) is DynamoType else DynamoType(member)
            member_kind, member_value = typed.type, typed.value
            if type(member_value) is str and (member_kind == "N" or (member_kind == "S" and member_value.isascii())):
                total += len(member_value)
            else:
                total += _size(member_kind, member_value, True)
        return total
    if kind == "L":
        total = 0
        for member in value:
            if type(member) is DynamoType:
                typed = member
            elif rewrapped:
                typed = DynamoType(member)
            else:
                total += member.size()  # moto's own call (a plain dict has none: moto's AttributeError)
                continue
            member_kind, member_value = typed.type, typed.value
            if type(member_value) is str and (member_kind == "N" or (member_kind == "S" and member_value.isascii())):
                total += len(member_value)
            else:
                total += _size(member_kind, member_value, rewrapped)
        return total
    set_member_kind = _SET_MEMBER_TYPES.get(kind)
    if set_member_kind is not None:  # each member sized as moto's DynamoType({member type: member})
        total = 0
        for member in value:
            if set_member_kind == "S" and type(member) is str and member.isascii():
                total += len(member)
            else:
                total += _size(set_member_kind, member, False)
        return total
    if isinstance(value, bool):
        return 1
    return bytesize(value)


def dynamo_type_size(self: DynamoType) -> int:
    """moto's DynamoType.size."""
    return _size(self.type, self.value, False)


def item_size(self: Item) -> int:
    """moto's Item.size: each attribute's name (UTF-8 bytes) and value."""
    total = 0
    for key, value in self.attrs.items():
        total += len(key) if type(key) is str and key.isascii() else bytesize(key)
        if type(value) is not DynamoType:
            total += value.size()
            continue
        kind, held = value.type, value.value
        if type(held) is str and (kind == "N" or (kind == "S" and held.isascii())):
            total += len(held)
        else:
            total += _size(kind, held, False)
    return total


def _entry_size(entry: Any) -> int:
    """An attribute name's or value's size as moto's LimitedSizeDict counts what it already holds."""
    return _size(entry.type, entry.value, False) if type(entry) is DynamoType else bytesize(str(entry))


def limited_size_dict_setitem(self: LimitedSizeDict, key: str, value: Any) -> None:
    """moto's LimitedSizeDict.__setitem__: refuses (ItemSizeTooLarge) an attribute that would take the item
    past MAX_ITEM_SIZE, counting what the item holds (an attribute replaced included) and the new one."""
    current = sum(_entry_size(name) for name in self) + sum(_entry_size(held) for held in self.values())
    new = bytesize(key) + _entry_size(value)
    if current + new > MAX_ITEM_SIZE:
        raise ItemSizeTooLarge
    dict.__setitem__(self, key, value)


def item_init(self: Item, hash_key: DynamoType, range_key: DynamoType | None, attrs: dict[str, Any]) -> None:
    """moto's Item.__init__, the item's size kept as its attributes are put (moto sizes it again at each)."""
    self.hash_key = hash_key
    self.range_key = range_key
    self.attrs = built = LimitedSizeDict()
    held = 0  # the size moto would count for what `built` holds
    for key, value in attrs.items():
        typed = DynamoType(value)
        if key in built:  # (a mapping naming a key twice: moto counts the replaced value too)
            limited_size_dict_setitem(built, key, typed)
            held = sum(_entry_size(name) for name in built) + sum(_entry_size(kept) for kept in built.values())
            continue
        kind, value_held = typed.type, typed.value
        if type(value_held) is str and (kind == "N" or (kind == "S" and value_held.isascii())):
            size = len(value_held)
        else:
            size = _size(kind, value_held, False)
        if held + bytesize(key) + size > MAX_ITEM_SIZE:
            raise ItemSizeTooLarge
        dict.__setitem__(built, key, typed)
        held += (len(key) if type(key) is str and key.isascii() else bytesize(str(key))) + size


_original_dynamo_type_size = DynamoType.size
_original_item_size = Item.size
_original_limited_size_dict_setitem = LimitedSizeDict.__setitem__
_original_item_init = Item.__init__

PATCHES = (
    (DynamoType, "size", dynamo_type_size),
    (Item, "size", item_size),
    (LimitedSizeDict, "__setitem__", limited_size_dict_setitem),
    (Item, "__init__", item_init),
)
