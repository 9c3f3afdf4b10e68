"""A store's schema: attribute name -> type and domain hints (README: Language).

Why: every expression is type-checked against the schema when it is inserted (so that
``genre > 3`` fails at insert time, not as a silent non-match), and every event is validated
against it before matching, so that the index only ever sees values of the declared type:
ints within signed 64-bit, finite floats, strings, bools, tuples of ints, of numbers
(``float_list``: ints kept exact) or of strings.

The schema is plain data, stored in the store as the JSON document the README's Language
section describes (:meth:`Schema.to_json` / :meth:`Schema.from_json` round-trip).  When a
bulk load has no schema, :meth:`Schema.infer` derives one from the expressions' literals.

Cost: :meth:`Schema.validate_event` is one dict lookup and one type check per event key
(plus one check per list element), and one lookup per attribute declared
``allow_undefined: false``; attributes the schema does not know cost one lookup each.

>>> s = Schema.from_json({"attributes": {"price": {"type": "int"},
...                                        "tags": {"type": "string_list"}}})
>>> s.validate_event({"price": 26, "tags": ["a", "b"], "other": 1, "missing": None})
{'price': 26, 'tags': ('a', 'b')}
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType

from betree.lang import arrays, ipaddr, special
from betree.lang.elements import MAX_EVENT_ELEMENTS, Elements
from betree.lang.expr import (
    And,
    AnyOf,
    Between,
    BoolAttr,
    Compare,
    Const,
    Contains,
    ExpressionError,
    InList,
    IsEmpty,
    IsNull,
    ListOp,
    Node,
    Not,
    Or,
    Pattern,
    Special,
    StrFunc,
)
from betree.lang.fold import fold_value
from betree.lang.lexicon import (
    IDENT_RE,
    INT64_MAX,
    INT64_MIN,
    KEYWORDS,
    LIST_ELEMENT,
    OBJECTS,
    TYPES,
)
from betree.lang.parser import parse
from betree.lang.paths import flatten, is_nested
from storage.errors import InvalidInput

#: A subscription id: a string, or an integer in signed 64-bit range.
SubId = int | str
#: A domain hint: a number for numeric attributes, a string for string attributes.
Bound = int | float | str

_SPEC_KEYS = frozenset(("type", "min", "max", "allow_undefined", "fold_case"))


@dataclass(frozen=True, slots=True)
class AttrSpec:
    """One attribute: its ``type`` (one of :data:`~betree.lang.lexicon.TYPES`), optional
    ``min``/``max`` hints for the BE-Tree's space clustering (values outside them are still
    legal), whether an event may leave it undefined, and whether its strings compare after
    Unicode case folding (:mod:`betree.lang.fold`; string and string_list only)."""

    name: str
    type: str
    min: Bound | None = None
    max: Bound | None = None
    allow_undefined: bool = True
    fold_case: bool = False

    def to_json(self) -> dict[str, object]:
        """The attribute's entry in the schema document (defaults left out)."""
        out: dict[str, object] = {"type": self.type}
        if self.min is not None:
            out["min"] = self.min
        if self.max is not None:
            out["max"] = self.max
        if not self.allow_undefined:
            out["allow_undefined"] = False
        if self.fold_case:
            out["fold_case"] = True
        return out


class InferenceError(InvalidInput):
    """``Schema.infer`` could not settle some attributes' types.

    ``problems`` maps each such attribute to the ids of the subscriptions at fault (those
    whose literals conflict, or every subscription using an attribute no literal types), so
    that a loader can reject exactly those records.
    """

    def __init__(self, message: str, problems: dict[str, list[SubId]]) -> None:
        super().__init__(message, hint="give the load a schema (--schema)")
        self.problems = problems


class Schema:
    """An immutable set of :class:`AttrSpec`, keyed by name.

    Build it with :meth:`from_json` (the stored form) or from ``AttrSpec`` values; both
    validate every attribute and raise :class:`~storage.errors.InvalidInput` naming it.
    """

    __slots__ = ("_arrays", "_attrs", "_checkers", "_declared", "_lists", "_required", "folded")

    def __init__(self, specs: Iterable[AttrSpec]) -> None:
        attrs: dict[str, AttrSpec] = {}
        for spec in specs:
            _check_spec(spec)
            if spec.name in attrs:
                raise InvalidInput(f'schema: attribute "{spec.name}" is declared twice')
            attrs[spec.name] = spec
        self._declared = tuple(attrs)
        #: per array path (betree.lang.arrays), its members: path inside an element ->
        #: (attribute name, the check of one value of the list's element type)
        self._arrays: dict[str, dict[str, tuple[str, Callable[[str, object], object]]]] = {}
        for path in arrays.array_paths({n: s.type for n, s in attrs.items()}):
            prefix = path + "."
            self._arrays[path] = {
                n[len(prefix) :]: (n, _element_checker(s))
                for n, s in attrs.items()
                if n.startswith(prefix) and s.type in LIST_ELEMENT
            }
        for path in self._arrays:  # derived, never declared: to_json leaves them out
            attrs[path] = AttrSpec(path, OBJECTS)
        self._attrs: Mapping[str, AttrSpec] = MappingProxyType(attrs)
        self._required = tuple(n for n, s in attrs.items() if not s.allow_undefined)
        self._lists = tuple(n for n, s in attrs.items() if s.type.endswith("_list"))
        #: The attributes that compare case-folded (:mod:`betree.lang.fold`).
        self.folded = frozenset(n for n, s in attrs.items() if s.fold_case)
        self._checkers: dict[str, Callable[[str, object], object]] = {
            n: _folding(_CHECKERS[s.type]) if s.fold_case else _CHECKERS[s.type]
            for n, s in attrs.items()
            if s.type != OBJECTS
        }

    @property
    def attributes(self) -> Mapping[str, AttrSpec]:
        """Attribute name -> :class:`AttrSpec` (read-only): those declared, and the array
        paths derived from them (type ``objects``: :mod:`betree.lang.arrays`)."""
        return self._attrs

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Schema):
            return NotImplemented
        return dict(self._attrs) == dict(other._attrs)

    def __hash__(self) -> int:
        return hash(frozenset(self._attrs.values()))

    def __repr__(self) -> str:
        return f"Schema({list(self._attrs.values())!r})"

    # -- the stored form -------------------------------------------------------------------

    @classmethod
    def from_json(cls, doc: Mapping[str, object]) -> Schema:
        """Validate and load the schema document (README: Language).

        Raises ``InvalidInput`` naming the attribute for an unknown type or key, a bad
        ``min``/``max`` (wrong type for the attribute, not finite, ``min > max``), a
        non-bool ``allow_undefined``, or a name that is not an identifier or is reserved.
        """
        if not isinstance(doc, Mapping):
            raise InvalidInput("schema: the document must be a JSON object")
        extra = sorted(set(doc) - {"attributes"})
        if extra:
            raise InvalidInput(f'schema: unknown key "{extra[0]}" (expected only "attributes")')
        attributes = doc.get("attributes")
        if not isinstance(attributes, Mapping):
            raise InvalidInput('schema: "attributes" must be a JSON object of attributes')
        specs = []
        for name, entry in attributes.items():
            if not isinstance(entry, Mapping):
                raise InvalidInput(f'schema: attribute "{name}" must be a JSON object')
            unknown = sorted(set(entry) - _SPEC_KEYS)
            if unknown:
                raise InvalidInput(
                    f'schema: attribute "{name}": unknown key "{unknown[0]}"',
                    hint='the keys are "type", "min", "max", "allow_undefined" and "fold_case"',
                )
            if "type" not in entry:
                raise InvalidInput(f'schema: attribute "{name}" has no "type"')
            specs.append(
                AttrSpec(
                    name,
                    entry["type"],  # checked in _check_spec
                    entry.get("min"),
                    entry.get("max"),
                    entry.get("allow_undefined", True),
                    entry.get("fold_case", False),
                )
            )
        return cls(specs)

    def to_json(self) -> dict[str, object]:
        """The schema document; ``Schema.from_json(s.to_json()) == s``."""
        return {"attributes": {n: self._attrs[n].to_json() for n in self._declared}}

    # -- events ------------------------------------------------------------------------------

    def validate_event(self, event: Mapping[str, object]) -> dict[str, object]:
        """The event's defined, known attributes, type-checked (README: Language, events).

        Unknown attributes are ignored, ``None`` (JSON null) means undefined and is dropped.
        ``int`` takes integers in signed 64-bit (not bools, not floats such as ``3.0``);
        ``float`` takes any finite number (not bools) and stores it as a ``float``; ``bool``
        takes ``True``/``False``; ``string`` takes strings; list attributes take lists (or
        tuples) of the element type without ``None`` elements and come back as tuples.
        An attribute with ``allow_undefined: false`` must be defined.  Raises
        ``InvalidInput`` naming the attribute and the reason.
        """
        if not isinstance(event, Mapping):
            raise InvalidInput(f"an event must be a JSON object, not {_describe(event)}")
        out: dict[str, object] = {}
        checkers = self._checkers
        raw = event
        values = event.values()
        # (the types first: 0.4 µs for 15 plain values, where is_nested on each takes 3)
        if not _PLAIN.issuperset(map(type, values)) and any(map(is_nested, values)):
            for name, value in event.items():  # an object where a declared value belongs
                if name in checkers and type(value) not in _PLAIN and is_nested(value):
                    checkers[name](name, value)  # raises, naming what it expected
            event = flatten(event)  # dotted paths (betree.lang.paths)
        for name, value in event.items():
            if value is None:
                continue
            check = checkers.get(name)
            if check is not None:
                out[name] = check(name, value)
        if self._lists:
            total = sum(len(out[n]) for n in self._lists if n in out)  # type: ignore[arg-type, misc]
            if total > MAX_EVENT_ELEMENTS:
                raise _too_many_elements("the event's lists", total)
        for path, members in self._arrays.items():  # elements kept whole, for "any"
            found = arrays.find(raw, path)
            if found is not None:
                kept = arrays.elements(found, members)
                if kept is not None:
                    out[path] = kept
        for name in self._required:
            if name not in out:
                raise InvalidInput(
                    f'attribute "{name}" is missing or null, but it cannot be undefined '
                    "(allow_undefined is false)"
                )
        return out

    # -- inference -----------------------------------------------------------------------------

    @classmethod
    def infer(cls, records: Iterable[tuple[SubId, str]]) -> Schema:
        """Infer a schema from ``(id, expression)`` records (README: Language).

        Each attribute gets the type its literals reveal: int and float literals on one
        attribute give ``float``; a bare ``a`` or ``not a`` gives ``bool``; ``v in a``,
        ``a one of (…)`` give ``int_list``/``string_list``, and ``float_list`` when a float
        literal is among the elements.  Any other conflict, or an
        attribute whose type no literal reveals (only ``is null``, ``is empty``,
        ``in ()``…), raises :class:`InferenceError` naming each such attribute and the
        offending subscription ids.  Records that do not parse are skipped: compiling them
        against the inferred schema rejects them with their own error.

        Cost: one parse per record plus one walk of its tree.
        """
        # attribute -> evidence kind -> ids (in input order, each once)
        evidence: dict[str, dict[str, dict[SubId, None]]] = {}
        for sub_id, text in records:
            try:
                node = parse(text)
            except ExpressionError:
                continue
            for attr, kind in type_evidence(node):
                evidence.setdefault(attr, {}).setdefault(kind, {})[sub_id] = None
        specs: list[AttrSpec] = []
        problems: dict[str, list[SubId]] = {}
        lines: list[str] = []
        for attr in sorted(evidence):
            kinds = evidence[attr]
            typ, reason, bad = _resolve(kinds)
            if typ is not None:
                specs.append(AttrSpec(attr, typ))
                continue
            ids = list(dict.fromkeys(i for k in bad for i in kinds[k]))
            problems[attr] = ids
            lines.append(f'attribute "{attr}": {reason}')
        if problems:
            raise InferenceError("cannot infer the schema: " + "; ".join(lines), problems)
        return cls(specs)


# -- spec validation ----------------------------------------------------------------------------


def _check_spec(spec: AttrSpec) -> None:
    name = spec.name
    if not isinstance(name, str) or not IDENT_RE.match(name):
        raise InvalidInput(
            f"schema: attribute name {json.dumps(name)} is not an identifier "
            "([A-Za-z_][A-Za-z0-9_-]*, dotted paths of them allowed)"
        )
    if name.lower() in KEYWORDS:
        raise InvalidInput(f'schema: attribute name "{name}" is a reserved word')
    where = f'schema: attribute "{name}"'
    if spec.type not in TYPES:
        raise InvalidInput(
            f"{where}: unknown type {json.dumps(spec.type)} (expected one of {', '.join(TYPES)})"
        )
    if not isinstance(spec.allow_undefined, bool):
        raise InvalidInput(f'{where}: "allow_undefined" must be true or false')
    if not isinstance(spec.fold_case, bool):
        raise InvalidInput(f'{where}: "fold_case" must be true or false')
    if spec.fold_case and spec.type not in ("string", "string_list"):
        raise InvalidInput(f'{where}: "fold_case" applies to string and string_list attributes')
    for key in ("min", "max"):
        bound = getattr(spec, key)
        if bound is None:
            continue
        if spec.type in ("bool", "segments", "frequency_caps", "ip"):
            raise InvalidInput(f'{where}: "{key}" does not apply to a {spec.type} attribute')
        if spec.type in ("int", "int_list", "int_enum"):
            if not _is_int(bound) or not INT64_MIN <= bound <= INT64_MAX:
                raise InvalidInput(f'{where}: "{key}" must be an integer in signed 64-bit range')
        elif spec.type in ("float", "float_list"):
            if not _is_number(bound) or not _finite(bound):
                raise InvalidInput(f'{where}: "{key}" must be a finite number')
        elif not isinstance(bound, str):
            raise InvalidInput(f'{where}: "{key}" must be a string for a {spec.type} attribute')
        elif not bound.isascii() and not _is_unicode(bound):
            raise InvalidInput(f'{where}: "{key}" holds a lone surrogate (not valid Unicode)')
    if spec.min is not None and spec.max is not None and spec.min > spec.max:  # type: ignore[operator]
        raise InvalidInput(f'{where}: "min" ({spec.min!r}) is greater than "max" ({spec.max!r})')


def _is_int(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_number(v: object) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _finite(v: float) -> bool:
    """Whether ``v`` is a finite double (an integer beyond the double range is not)."""
    try:
        return math.isfinite(v)
    except OverflowError:
        return False


def _is_unicode(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


# -- event value checks: (attribute name, value) -> stored value ---------------------------------


def _describe(v: object) -> str:
    if isinstance(v, bool):
        return f"a bool ({'true' if v else 'false'})"
    if isinstance(v, int):
        return f"an integer ({v})"
    if isinstance(v, float):
        return f"a float ({v!r})"
    if isinstance(v, str):
        return f"a string ({json.dumps(v[:40])})"
    if isinstance(v, (list, tuple)):
        return "a list"
    if isinstance(v, Mapping):
        return "an object"
    if v is None:
        return "null"
    return f"a {type(v).__name__}"


def _bad(name: str, expected: str, v: object) -> InvalidInput:
    return InvalidInput(f'attribute "{name}": expected {expected}, got {_describe(v)}')


#: the types of event values that are never objects (no nesting to flatten)
_PLAIN = frozenset((int, float, str, bool, type(None)))


def _check_int(name: str, v: object) -> int:
    if type(v) is not int:
        if not _is_int(v):
            raise _bad(name, "an integer", v)
        v = int(v)  # type: ignore[call-overload]  # an int subclass
    if not INT64_MIN <= v <= INT64_MAX:  # type: ignore[operator]
        raise InvalidInput(f'attribute "{name}": integer {v} is outside the signed 64-bit range')
    return v  # type: ignore[return-value]


def _check_float(name: str, v: object) -> float:
    if type(v) is float:
        f = v
    elif _is_number(v):
        try:
            f = float(v)  # type: ignore[arg-type]
        except OverflowError:
            raise InvalidInput(f'attribute "{name}": the number is too large for a float') from None
    else:
        raise _bad(name, "a number", v)
    if not math.isfinite(f):
        raise InvalidInput(f'attribute "{name}": NaN and infinities are not allowed')
    return f


def _check_number(name: str, v: object) -> int | float:
    """A ``float_list`` element: a finite float, or an integer kept exact (never rounded to
    a double: ``9007199254740993`` stays unequal to ``9007199254740992.0``)."""
    if type(v) is int or _is_int(v):
        _check_float(name, v)  # within the double range
        return int(v)  # type: ignore[call-overload]
    return _check_float(name, v)


def _check_bool(name: str, v: object) -> bool:
    if v is True or v is False:
        return v
    raise _bad(name, "true or false", v)


def _check_string(name: str, v: object) -> str:
    if not isinstance(v, str):
        raise _bad(name, "a string", v)
    if not v.isascii():
        try:
            v.encode("utf-8")
        except UnicodeEncodeError:
            raise InvalidInput(
                f'attribute "{name}": the string holds a lone surrogate (not valid Unicode)'
            ) from None
    return v


def _plain_ints(v: Sequence[object]) -> bool:
    """Every element an ``int`` (not a bool or a subclass) of signed 64 bits."""
    if not all(type(x) is int for x in v):
        return False
    ints: Sequence[int] = v  # type: ignore[assignment]
    return not ints or (min(ints) >= INT64_MIN and max(ints) <= INT64_MAX)


def _ascii_strings(v: Sequence[object]) -> bool:
    """Every element a ``str`` of ASCII (nothing to check in its encoding)."""
    return all(type(x) is str for x in v) and "".join(v).isascii()  # type: ignore[arg-type]


def _list_checker(
    element: Callable[[str, object], object],
    what: str,
    plain: Callable[[Sequence[object]], bool] | None = None,
) -> Callable[[str, object], object]:
    """The check of a list attribute; ``plain`` says at once (no call an element) that a
    list's elements come back as they are (20-40 elements an event on ad-targeting
    rules: the per-element calls were a fifth of a batch's validation)."""

    def check(name: str, v: object) -> tuple[object, ...]:
        if not isinstance(v, (list, tuple)):
            raise _bad(name, f"a list of {what}", v)
        if len(v) > MAX_EVENT_ELEMENTS:
            raise _too_many_elements(f'attribute "{name}"', len(v))
        if plain is not None and plain(v):
            return Elements(v)
        out = []
        for i, x in enumerate(v):
            if x is None:
                raise InvalidInput(f'attribute "{name}": list element {i} is null')
            try:
                out.append(element(name, x))
            except InvalidInput as e:
                raise InvalidInput(f"{e.message} (list element {i})") from None
        return Elements(out)  # membership from a set built once (betree.lang.elements)

    return check


def _too_many_elements(what: str, count: int) -> InvalidInput:
    return InvalidInput(
        f"{what}: {count:,} list elements, more than the {MAX_EVENT_ELEMENTS:,} an event "
        "may hold in all (betree.lang.elements)"
    )


def _check_ip(name: str, v: object) -> str:
    """An IPv4 or IPv6 address as its key (:mod:`betree.lang.ipaddr`)."""
    if not isinstance(v, str):
        raise _bad(name, "an IP address string", v)
    try:
        return ipaddr.key(v)
    except ValueError as exc:
        raise InvalidInput(f'attribute "{name}": {exc}') from None


def _element_checker(spec: AttrSpec) -> Callable[[str, object], object]:
    """The check of one value of a list attribute's element type (folded if declared)."""
    check = _check_number if spec.type == "float_list" else _CHECKERS[LIST_ELEMENT[spec.type]]
    return _folding(check) if spec.fold_case else check


def _folding(check: Callable[[str, object], object]) -> Callable[[str, object], object]:
    """``check``, then the value case-folded (an attribute declared ``fold_case``)."""

    def folded(name: str, v: object) -> object:
        out = check(name, v)
        if type(out) is Elements:  # (a list comprehension: fold_value's generator costs 2x)
            return Elements([x.casefold() if isinstance(x, str) else x for x in out])
        return fold_value(out)

    return folded


_CHECKERS: dict[str, Callable[[str, object], object]] = {
    "int": _check_int,
    "float": _check_float,
    "bool": _check_bool,
    "string": _check_string,
    "int_list": _list_checker(_check_int, "integers", _plain_ints),
    "string_list": _list_checker(_check_string, "strings", _ascii_strings),
    "float_list": _list_checker(_check_number, "numbers"),
    "int_enum": _check_int,
    "segments": special.check_segments,
    "frequency_caps": special.check_frequency_caps,
    "ip": _check_ip,
}


# -- inference ------------------------------------------------------------------------------------

# Evidence kinds: a scalar type, a list type ("float_list": a float literal where a list element
# is expected), "list" (some list, element type unknown) and "scalar"/"any" (mentioned, type
# unknown).
_SCALARS = ("int", "float", "string", "bool")
_LISTS = ("int_list", "string_list", "float_list")


def _literal_kind(v: object) -> str:
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, int):
        return "int"
    if isinstance(v, float):
        return "float"
    return "string"


def type_evidence(node: Node) -> Iterable[tuple[str, str]]:
    """(attribute, evidence kind) for every atom of the tree: what :meth:`Schema.infer`
    gathers from each record (a distributed inference gathers the same per record, then
    settles each attribute with :func:`settled_type`).  Cost: one walk of the tree."""
    stack: list[Node] = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, (And, Or)):
            stack.extend(n.children)
        elif isinstance(n, Not):
            stack.append(n.child)
        elif isinstance(n, Const):
            continue
        elif isinstance(n, AnyOf):  # one element's values: the lists under the path
            for attr, kind in type_evidence(n.child):
                yield f"{n.attr}.{attr}", _AS_LIST.get(kind, "list")
        elif isinstance(n, Compare):
            yield n.attr, _literal_kind(n.value)
        elif isinstance(n, Between):
            yield n.attr, _literal_kind(n.lo)
            yield n.attr, _literal_kind(n.hi)
        elif isinstance(n, InList):
            yield n.attr, "scalar"
            for v in n.values:
                yield n.attr, _literal_kind(v)
        elif isinstance(n, Contains):
            yield n.attr, _literal_kind(n.value) + "_list"
        elif isinstance(n, ListOp):
            yield n.attr, "list"
            for v in n.values:
                yield n.attr, _literal_kind(v) + "_list"
        elif isinstance(n, IsEmpty):
            yield n.attr, "list"
        elif isinstance(n, IsNull):
            yield n.attr, "any"
        elif isinstance(n, BoolAttr):
            yield n.attr, "bool"
        elif isinstance(n, (StrFunc, Pattern)):
            yield n.attr, "string"
        elif isinstance(n, Special):
            if n.func == "geo_within_radius":
                yield n.attr, "float"
                yield special.longitude_attr(n.args), "float"
            else:
                yield n.attr, "segments" if n.func.startswith("segment_") else "frequency_caps"
                yield special.NOW, "int"


def settled_type(kinds: Collection[str]) -> str | None:
    """The type :meth:`Schema.infer` gives an attribute whose records show these evidence
    kinds (see :func:`type_evidence`), or ``None`` if they settle none (``Schema.infer``
    then raises, naming the records)."""
    return _resolve({kind: {} for kind in kinds})[0]


def _resolve(kinds: Mapping[str, Mapping[SubId, None]]) -> tuple[str | None, str, list[str]]:
    """(type, "", []) if the evidence settles the type, else (None, reason, offending kinds)."""
    specials = [k for k in ("segments", "frequency_caps") if k in kinds]
    if specials:  # only the be-tree functions reveal these types, and nothing else fits them
        if len(kinds) == 1:
            return specials[0], "", []
        return None, _conflict(list(kinds), kinds), list(kinds)
    scalars = [k for k in _SCALARS if k in kinds]
    lists = [k for k in _LISTS if k in kinds]
    scalar_like = scalars + (["scalar"] if "scalar" in kinds else [])
    list_like = lists + (["list"] if "list" in kinds else [])
    if scalar_like and list_like:
        bad = (scalars or ["scalar"]) + (lists or ["list"])
        return None, _conflict(bad, kinds), bad
    if scalars:
        if set(scalars) <= {"int", "float"}:
            return ("float" if "float" in scalars else "int"), "", []
        if len(scalars) == 1:
            return scalars[0], "", []
        return None, _conflict(scalars, kinds), scalars
    if set(lists) == {"int_list", "float_list"}:  # int and float literals: numbers
        return "float_list", "", []
    if len(lists) == 1:
        return lists[0], "", []
    if lists:
        return None, _conflict(lists, kinds), lists
    every = list(kinds)
    ids = dict.fromkeys(i for k in every for i in kinds[k])
    return None, "no literal reveals its type " + _ids_text(ids), every


#: Evidence inside ``any PATH (…)`` for the attribute's list type.
_AS_LIST = {"int": "int_list", "float": "float_list", "string": "string_list", "any": "any"}

_KIND_WORDS = {"list": "a list", "float_list": "a list of floats", "scalar": "a scalar"}


def _conflict(kinds: list[str], ids: Mapping[str, Mapping[SubId, None]]) -> str:
    parts = [f"{_KIND_WORDS.get(k, k)} {_ids_text(ids[k])}" for k in kinds]
    return "conflicting types: " + " vs ".join(parts)


def _ids_text(ids: Iterable[SubId]) -> str:
    found = list(ids)
    shown = ", ".join(json.dumps(i) for i in found[:10])
    more = f" and {len(found) - 10} more" if len(found) > 10 else ""
    return f"(ids {shown}{more})"
