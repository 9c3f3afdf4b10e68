"""Nested JSON events as dotted attribute paths (README: Language, events).

An object value is flattened into dotted paths: ``{"user": {"age": 30}}`` defines
``user.age``.  An array of objects defines, for each leaf path, the list of the leaves'
values in order (a leaf that is itself a list gives its elements): ``{"items": [{"sku":
"a"}, {"sku": "b"}]}`` defines ``items.sku = ["a", "b"]``, for a list-typed attribute.  A
flat key containing dots names the same attribute, and an event that gives one attribute
both ways is an error for that event, as is nesting deeper than :data:`MAX_DEPTH` objects.
``null`` leaves are undefined (left out).

Cost: nothing for an event without an object value (one type check per value, made by
:meth:`betree.lang.schema.Schema.validate_event` anyway); otherwise one step per value of
the nested objects.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

from storage.errors import InvalidInput

#: Deepest object nesting an event may have.
MAX_DEPTH = 32


#: value types that are never objects nor arrays (checked first: the ABC check of
#: ``Mapping`` costs ~0.3 µs a value, ~100 of them an ad-targeting event)
_LEAVES = frozenset((str, int, float, bool, type(None)))
#: exact types that are never objects: the leaves and the plain arrays (a rich event's lists,
#: ~50 elements of which segments' pairs are lists, each passed the ABC check: 37 -> ~30 µs
#: an event's validation)
_NOT_OBJECTS = _LEAVES | frozenset((list, tuple))


def _is_object(x: object) -> bool:
    """``isinstance(x, Mapping)``, at once for a ``dict`` and the types never objects."""
    kind = type(x)
    if kind is dict:
        return True
    return kind not in _NOT_OBJECTS and isinstance(x, Mapping)


def is_nested(value: object) -> bool:
    """Whether a top-level event value is an object, or an array of objects."""
    if _is_object(value):
        return True
    return isinstance(value, list) and bool(value) and _is_object(value[0])


def is_nested_element(x: object) -> bool:
    """Whether an array's element is an object."""
    return _is_object(x)


def flatten(event: Mapping[str, object]) -> dict[str, object]:
    """The event with its nested objects as dotted paths; ``InvalidInput`` naming the
    attribute given twice, the path nested too deep, or the array that mixes objects and
    other values."""
    flat: dict[str, object] = {}
    nested: dict[str, object] = {}
    made: set[str] = set()  # (the paths gathered from arrays of objects into lists of ours)
    for key, value in event.items():
        if type(value) not in _LEAVES and is_nested(value):
            _walk(key, value, 1, nested, made, in_array=False)
        else:
            flat[key] = value
    twice = sorted(k for k in nested if k in flat and flat[k] is not None)
    if twice:
        raise InvalidInput(
            f'attribute "{twice[0]}" is given both as a flat key and nested: give it once'
        )
    flat.update(nested)
    return flat


def _walk(
    path: str, value: Any, depth: int, out: dict[str, object], made: set[str], in_array: bool
) -> None:
    if depth > MAX_DEPTH:
        raise InvalidInput(f'"{path}" nests deeper than {MAX_DEPTH} objects')
    if _is_object(value):
        leaf_ok = depth < MAX_DEPTH and not in_array  # (a child's own checks, inlined)
        for key, child in value.items():
            kind = type(child)
            if leaf_ok and (
                kind in _LEAVES or (kind is list and _LEAVES.issuperset(map(type, child)))
            ):  # a scalar, or a list of scalars: no call (rich: 16 -> 6 calls an event)
                if child is not None:
                    child_path = f"{path}.{key}"
                    if child_path in out:
                        raise InvalidInput(f'attribute "{child_path}" is given twice')
                    out[child_path] = child
            else:
                _walk(f"{path}.{key}", child, depth + 1, out, made, in_array)
        return
    if (
        isinstance(value, list)
        and value
        and not _LEAVES.issuperset(map(type, value))
        and any(map(_is_object, value))
    ):
        if not all(map(_is_object, value)):
            raise InvalidInput(f'"{path}" is an array that mixes objects and other values')
        for element in value:
            _walk(path, element, depth + 1, out, made, in_array=True)
        return
    if value is None:
        return
    if not in_array:
        if path in out:
            raise InvalidInput(f'attribute "{path}" is given twice')
        out[path] = value
        return
    if path not in out:
        made.add(path)
        out[path] = []
    elif path not in made:  # also given outside an array (never extend the event's own list)
        raise InvalidInput(f'attribute "{path}" is given twice')
    gathered = cast(list[object], out[path])
    if isinstance(value, list):
        gathered.extend(value)
    else:
        gathered.append(value)
