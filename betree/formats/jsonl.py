"""JSON Lines as bexdb reads them: lines split at ``\n`` only, each decoded on its own;
and the result lines ``bexdb match`` writes (:func:`dump_result`).

Subscription records (:mod:`loaders.records`) and events (:mod:`betree.streams.stream`) go through
the same two functions, so that a line is refused with the same words wherever it is read.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from itertools import accumulate
from typing import Any

import numpy as np
import orjson

from storage.errors import InvalidInput

#: A UTF-8 byte order mark.  At the very start of an input file it is ignored (RFC 8259
#: allows a parser to; Windows editors write one, and Spark's line reader drops it);
#: anywhere else it is a character, and a line that starts with one is malformed JSON.
BOM = b"\xef\xbb\xbf"
#: The deepest nesting of arrays and objects a line may have.  Checked before parsing,
#: so that where the limit falls does not depend on the caller's stack (the parser's
#: recursion limit would: a Spark worker runs it deeper than ``bexdb load`` does, and the
#: two engines must reject the same lines).  Records and events need two levels.
MAX_DEPTH = 128
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)
_NOT_BRACKET = re.compile(r"[^][{}]+")
_LONG_DIGITS = re.compile(rb"[0-9]{19}").search
_HUGE_INT = "Exceeds the limit"  # how int() refuses more than sys.get_int_max_str_digits()


def input_lines(fh: Iterable[bytes]) -> Iterator[bytes]:
    """The lines of a JSON Lines file read as bytes, without their ``b"\\n"``, a BOM at
    its start dropped.

    Lines end at ``b"\\n"`` only (a ``"\\r"`` before it, or anywhere, is JSON white
    space), and each is decoded on its own (:func:`loads_line`): a line that is not UTF-8
    is one bad line, not the end of the input.  Spark reads files the same way
    (``lineSep="\\n"``, :func:`loaders.spark.extract.extract`), so both engines see the
    same text and give a line the same error (a truncated line is "at column N", never at
    a "line 2" after its end).
    """
    lines = iter(fh)
    for first in lines:
        yield first.removeprefix(BOM).removesuffix(b"\n")
        break
    for line in lines:
        yield line.removesuffix(b"\n")


def loads_line(raw: bytes | str) -> Any:
    """The JSON value of one line (or file); raises ``InvalidInput`` with the reason it
    has none.

    Not UTF-8, malformed JSON, nesting deeper than :data:`MAX_DEPTH`, an integer of more
    than 4,300 digits: each is the line's own error.  Cost: one ``orjson.loads`` (~0.3 µs
    for a subscription record, against ~1.5 for ``json.loads``) and a walk of the value
    (:func:`_plain`) when orjson reads the line as ``json.loads`` does: nested at most
    :data:`MAX_DEPTH` deep, and, if it holds a float, no run of 19 digits (orjson turns
    an integer past 64 bits into a float).  Any other line, and any line orjson refuses
    (it does not read ``NaN``, lone surrogates or overflowing floats, which ``json`` does,
    and words its errors differently), takes the general path: one decode and one
    ``json.loads``; a line with more than :data:`MAX_DEPTH` brackets is scanned once more.
    """
    if type(raw) is bytes:
        try:
            value = orjson.loads(raw)
        except orjson.JSONDecodeError:
            pass  # the general path says why, or reads what only it reads
        else:
            plain = _plain(value, 0)
            if plain is True or (plain is None and _LONG_DIGITS(raw) is None):
                return value
    try:
        text = raw.decode("utf-8") if isinstance(raw, bytes) else raw
    except UnicodeDecodeError as exc:
        raise InvalidInput(f"not UTF-8: {exc.reason} at byte {exc.start}") from None
    if text.count("[") + text.count("{") > MAX_DEPTH and _depth(text) > MAX_DEPTH:
        raise InvalidInput(f"malformed JSON: nested too deeply (more than {MAX_DEPTH} levels)")
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        if exc.pos == 0 and text.startswith("\ufeff"):
            raise InvalidInput(
                "malformed JSON: a byte order mark (U+FEFF) starts the line; "
                "only the file's first line may have one"
            ) from None
        where = f"line {exc.lineno} column" if exc.lineno > 1 else "column"  # a whole file
        raise InvalidInput(f"malformed JSON: {exc.msg} at {where} {exc.colno}") from None
    except RecursionError:  # a caller already deep in its stack
        raise InvalidInput("malformed JSON: nested too deeply") from None
    except ValueError as exc:
        if str(exc).startswith(_HUGE_INT):
            raise InvalidInput("malformed JSON: an integer of more than 4300 digits") from None
        raise InvalidInput(f"malformed JSON: {exc}") from None


def _plain(value: Any, depth: int) -> bool | None:
    """Whether ``value`` (nested ``depth`` deep) nests within :data:`MAX_DEPTH` and holds
    no float (True), holds floats (None), or nests deeper (False)."""
    kind = type(value)
    if kind is dict:
        items = value.values()
    elif kind is list:
        items = value
    else:
        return None if kind is float else True
    if depth >= MAX_DEPTH:
        return False
    found: bool | None = True
    for item in items:
        kind = type(item)
        if kind is float:
            found = None
        elif kind is dict or kind is list:
            inner = _plain(item, depth + 1)
            if inner is False:
                return False
            if inner is None:
                found = None
    return found


def _depth(text: str) -> int:
    """The deepest nesting of brackets outside JSON strings in ``text``."""
    brackets = _NOT_BRACKET.sub("", _STRING.sub("", text))
    return max(accumulate(1 if c in "[{" else -1 for c in brackets), default=0)


def dump_results(results: Iterable[dict[str, Any]]) -> bytes:
    """JSON Lines of match results, each line exactly as ``json.dumps`` writes the result
    with its ``"matches"`` as a list (:func:`dump_result`)."""
    return b"".join(map(dump_result, results))


def dump_result(result: dict[str, Any]) -> bytes:
    """One result as a JSON line, byte for byte ``json.dumps(result) + "\n"`` with
    ``"matches"`` (a list or a numpy array of ids) as a list; ``"matches"`` given as bytes
    (:func:`meta_matches`) is written as it is.

    Why: an event of a 1M-subscription store matches about 10,000 ids, and ``json.dumps``
    of them was 30% of ``bexdb match`` (56–120 ns an id).  Integer ids, last in the
    result, are written by orjson (C: 3.4 ns an id from an ``int64`` array, 4.6 from a
    list) with json's ``", "`` put back between them: integers hold no comma, so the bytes
    are json's; the keys before them (``"line"``, ``"file"``) go through ``json.dumps``.  A
    string id (orjson's escaping differs from json's), an integer past 64 bits, or an
    error sends the whole result through ``json.dumps``.
    """
    ids = result.get("matches")
    if isinstance(ids, bytes):  # written already (:func:`meta_matches`)
        head = json.dumps({k: v for k, v in result.items() if k != "matches"})[:-1].encode()
        return head + (b", " if len(result) > 1 else b"") + b'"matches": ' + ids + b"}\n"
    body = None if ids is None or next(reversed(result)) != "matches" else _int_ids(ids)
    if body is None:
        if isinstance(ids, np.ndarray):
            result = {**result, "matches": ids.tolist()}
        return (json.dumps(result) + "\n").encode()
    head = b"{"
    if len(result) > 1:
        head = json.dumps({k: v for k, v in result.items() if k != "matches"})[:-1].encode()
        head += b", "
    return head + b'"matches": [' + body[1:-1].replace(b",", b", ") + b"]}\n"


def meta_matches(
    pairs: Iterable[tuple[Any, str | None]], shown: dict[Any, str] | None = None
) -> bytes:
    """A result's ``"matches"`` with metadata, ``[{"id": ID, "meta": META}, ...]``, for
    :func:`dump_result`: each metadata text as stored (compact JSON, :mod:`betree.disk.metadata`;
    ``null`` for none), the rest spaced as ``json.dumps`` spaces it.  ``shown``: the items
    written so far by id, reused (a batch's events often match the same subscriptions)."""
    shown = {} if shown is None else shown
    items = []
    for ident, text in pairs:
        item = shown.get(ident)
        if item is None:
            key = str(ident) if type(ident) is int else json.dumps(ident)
            item = shown[ident] = f'{{"id": {key}, "meta": {"null" if text is None else text}}}'
        items.append(item)
    return ("[" + ", ".join(items) + "]").encode()


def _int_ids(ids: Any) -> bytes | None:
    """``ids`` as orjson writes them, or None unless every id is a 64-bit integer."""
    try:
        if isinstance(ids, np.ndarray):
            if ids.dtype == np.int64:
                return orjson.dumps(ids, option=orjson.OPT_SERIALIZE_NUMPY)
            ids = ids.tolist()
        body = orjson.dumps(ids)
    except orjson.JSONEncodeError:  # an integer past 64 bits
        return None
    return None if b'"' in body else body
