"""Arrays of objects as ``any PATH (EXPR)`` reads them: the schema seen from inside an
element, and an event's elements with their values (README: Language, same-element
matching).

Why: a nested event's array of objects is flattened into one list per leaf path
(:mod:`betree.lang.paths`: ``items.sku = ["a", "b"]``), which loses which values came from
the same element.  ``any items (sku = "a1" and price > 10)`` needs them per element, so the
schema derives, from its declared lists (``items.sku``: ``string_list``), the *array paths*
(``items``, of type :data:`~betree.lang.lexicon.OBJECTS`), and an event's validated values
hold, under each array path it gives, a tuple of one dict per element: the element's values
by their paths inside it (``{"sku": "a1", "price": 12.5}``), each checked as one value of
the list's element type.

Inside an element a value that is itself an array (``tags: ["x"]``) is not one value: it is
left out (undefined inside ``any``); an array path is read through objects only (an array
of objects on the way to it gives no elements).

Cost: per event, one lookup per array path of the schema; per element given, one
flattening of the element and one check per value the schema declares under the path.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING

from betree.lang.lexicon import LIST_ELEMENT
from betree.lang.paths import flatten

if TYPE_CHECKING:  # for annotations only: the schema imports this module's users
    from betree.lang.schema import AttrSpec

#: One element's values by their paths inside it.
Element = dict[str, object]


def array_paths(types: Mapping[str, str]) -> list[str]:
    """The array paths of a schema (attribute name -> type): every proper prefix of a
    dotted list attribute that is not itself declared, sorted."""
    found: set[str] = set()
    for name, typ in types.items():
        if typ in LIST_ELEMENT:
            parts = name.split(".")
            found.update(".".join(parts[:k]) for k in range(1, len(parts)))
    return sorted(found - set(types))


class ElementAttrs(Mapping[str, "AttrSpec"]):
    """The attributes an expression inside ``any path (…)`` may name: for each declared
    list ``path.x``, ``x`` with the list's element type (named by its full path in errors).
    Cost: built per ``any`` parsed, one pass over the schema's attributes."""

    def __init__(self, attrs: Mapping[str, AttrSpec], path: str) -> None:
        prefix = path + "."
        self._specs = {
            name[len(prefix) :]: dataclasses.replace(
                spec, type=LIST_ELEMENT[spec.type], min=None, max=None, allow_undefined=True
            )
            for name, spec in attrs.items()
            if name.startswith(prefix) and spec.type in LIST_ELEMENT
        }

    def __getitem__(self, name: str) -> AttrSpec:
        return self._specs[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._specs)

    def __len__(self) -> int:
        return len(self._specs)


def find(event: Mapping[str, object], path: str) -> object:
    """The raw value at ``path`` of an event (dotted keys or nested objects, mixed), or
    ``None``."""
    if path in event:
        return event[path]
    parts = path.split(".")
    for k in range(1, len(parts)):
        value = event.get(".".join(parts[:k]))
        if isinstance(value, Mapping):
            found = find(value, ".".join(parts[k:]))
            if found is not None:
                return found
    return None


def elements(
    raw: object, members: Mapping[str, tuple[str, Callable[[str, object], object]]]
) -> tuple[Element, ...] | None:
    """An array path's elements from its raw value (``None`` unless an array of objects,
    or empty): each element's values by path, for the ``members`` (path inside the element
    -> (full attribute name, the element type's check, which raises naming it))."""
    if not isinstance(raw, (list, tuple)):
        return None
    if not all(isinstance(x, Mapping) for x in raw):
        return None
    out = []
    for element in raw:
        values = flatten(element)
        kept: Element = {}
        for name, value in values.items():
            member = members.get(name)
            if member is not None and value is not None and not isinstance(value, list):
                full, check = member
                kept[name] = check(full, value)
        out.append(kept)
    return tuple(out)
