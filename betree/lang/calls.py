"""The be-tree library's function calls as syntax: which arguments each takes, and the
attributes each reads, checked against a schema (README: Language).

Why apart from the parser: the calls' shapes (an optional leading attribute, an optional
frequency-cap id, the geo call's two optional attributes) are a subject of their own; the
parser (:mod:`betree.lang.parser`) cuts the arguments out of the text and hands them here
with their token positions, and raises the errors this module finds at those positions.

Cost: a few comparisons per argument.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, NoReturn

from betree.lang import special
from betree.lang.expr import Scalar, Special

if TYPE_CHECKING:  # for annotations only
    from betree.lang.schema import AttrSpec

#: One argument as cut from the text: (value, kind, token index); kind is ``ident`` (an
#: attribute name, given with the enclosing ``any`` path's prefix), ``int``, ``float``,
#: ``str``, ``bool`` or ``none`` (the frequency cap's missing id).
Arg = tuple[object, str, int]
#: ``fail(token index, reason, hint)``: raise the expression error there.
Fail = Callable[[int, str, "str | None"], NoReturn]


def special_call(
    func: str, fi: int, args: list[Arg], attrs: Mapping[str, AttrSpec] | None, fail: Fail
) -> Special:
    """The node of ``func(args)`` (token ``fi`` is the function's name), its arguments
    checked, and with ``attrs`` the attributes it reads checked against the schema."""
    counts = special.FUNCTIONS[func]
    if len(args) not in counts:
        want = " or ".join(map(str, counts))
        fail(fi, f"{func} takes {want} arguments, not {len(args)}", None)
    named: list[tuple[str, int]] = []  # the attributes named as arguments, with their tokens
    if func.startswith("segment_"):
        if len(args) == 3:
            named.append(_ident(args.pop(0), fail))
            attr = named[0][0]
        else:
            attr = special.DEFAULT_SEGMENTS
        shape: tuple[str, ...] = ("int", "int")
    elif func == "within_frequency_cap":
        attr = special.FREQUENCY_CAPS
        if len(args) == 4:
            args.insert(1, (None, "none", -1))
        shape = ("str", "int", "str", "int", "int")
    else:
        attr, lon = special.LATITUDE, special.LONGITUDE
        if len(args) == 5:
            named += [_ident(args.pop(0), fail), _ident(args.pop(0), fail)]
            attr, lon = named[0][0], named[1][0]
        shape = ("number", "number", "number")
    values: list[Scalar | None] = []
    for (given, kind, ai), want in zip(args, shape, strict=True):
        if kind == "none":
            values.append(None)
            continue
        ok = kind in ("int", "float") if want == "number" else kind == want
        if not ok:
            if kind == "ident":
                what = "a number" if want == "number" else "a literal"
                fail(ai, f'unexpected "{given}", expected {what}', None)
            fail(ai, f"{func} takes {'an integer' if want == 'int' else 'a ' + want} here", None)
        values.append(float(given) if want == "number" else given)  # type: ignore[arg-type]
    if func == "within_frequency_cap" and values[0] not in special.CAP_TYPES:
        fail(
            args[0][2],
            f"unknown frequency cap type {values[0]!r}",
            "the types are " + ", ".join(sorted(special.CAP_TYPES)),
        )
    if func == "geo_within_radius":
        lat0, lon0, km = values
        values = list(special.geo_constants(attr, lon, lat0, lon0, km))  # type: ignore[arg-type]
    if attrs is not None:
        if func == "geo_within_radius":
            needs = [(attr, "float"), (special.longitude_attr(tuple(values)), "float")]
        else:
            typ = "segments" if func.startswith("segment_") else "frequency_caps"
            needs = [(attr, typ), (special.NOW, "int")]
        _check_reads(func, needs, dict(named), fi, attrs, fail)
    return Special(func, attr, tuple(values))


def _ident(arg: Arg, fail: Fail) -> tuple[str, int]:
    value, kind, i = arg
    if kind != "ident":
        fail(i, f'unexpected "{value}", expected an attribute name', None)
    return str(value), i


def _check_reads(
    func: str,
    needs: list[tuple[str, str]],
    named: dict[str, int],
    fi: int,
    attrs: Mapping[str, AttrSpec],
    fail: Fail,
) -> None:
    """The attributes ``func`` reads exist with the right types; an error points at the
    attribute where it is named, else at the function."""
    for name, typ in needs:
        at = named.get(name, fi)
        spec = attrs.get(name)
        if spec is None:
            fail(
                at,
                f'{func} reads attribute "{name}", which the schema does not declare',
                f'declare "{name}" with type {typ}',
            )
        if spec.type != typ:
            fail(at, f'{func} needs {typ} attribute "{name}", not {spec.type}', None)
