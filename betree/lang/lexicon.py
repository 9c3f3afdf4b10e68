"""The words, symbols and value ranges of bexdb's expression language, in one place.

Why one module: the parser reads these words, the schema refuses them as attribute names
and knows the same type names and integer range, and the atoms write their constants back as
literals.  (The comparison operators are declared in :mod:`pbtree.operators`, the test
kinds in :mod:`betree.lang.testkinds`.)  Kept here, each
of those modules imports this one and none of them imports another for a constant.

It holds only constants and one small function (:func:`literal`), and imports nothing of
bexdb: importing it costs nothing worth mentioning.

>>> literal('say "hi"\\n')
'"say \\\\"hi\\\\"\\\\n"'
"""

from __future__ import annotations

import re

#: Reserved words (case-insensitive); none of them can name an attribute.
KEYWORDS = frozenset(
    {
        "and", "or", "not", "in", "between", "one", "none", "all", "of", "is", "null", "empty",
        "true", "false", "starts_with", "ends_with", "contains", "like", "matches", "any",
    }
)  # fmt: skip

#: What an attribute name looks like.
#: A dotted path (``user.age``) names an attribute of a nested event (betree.lang.paths).
IDENT_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*(?:\.[A-Za-z_][A-Za-z0-9_-]*)*\Z")

#: The attribute types a schema declares.
TYPES = (
    "bool", "int", "float", "string", "int_list", "string_list", "float_list",
    "int_enum", "segments", "frequency_caps", "ip",
)  # fmt: skip

#: The list types, and the type each holds (inside ``any PATH (…)`` an attribute declared
#: ``PATH.x`` with a list type is one element's value, of the element type).
LIST_ELEMENT = {"int_list": "int", "string_list": "string", "float_list": "float"}
#: The type of an array-of-objects path (``items`` when ``items.sku`` is a declared list):
#: never declared, derived by the schema; ``any PATH (…)`` reads it.
OBJECTS = "objects"

#: The range of integer literals and of int attribute values (signed 64-bit).
INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1

#: Deepest nesting of parentheses and "not" accepted (the parser, the normalizer and the
#: evaluator recurse once per level; Python's stack allows about a thousand frames).
MAX_NESTING = 100


def literal(v: int | float | str) -> str:
    """``v`` written as a literal of the language (parsing it gives ``v`` back)."""
    if isinstance(v, str):
        out = []
        for ch in v:
            if ch in '"\\':
                out.append("\\" + ch)
            elif ch == "\n":
                out.append("\\n")
            elif ch == "\t":
                out.append("\\t")
            elif ch == "\r":
                out.append("\\r")
            elif ch < " " or ch == "\x7f":
                out.append(f"\\u{ord(ch):04x}")
            else:
                out.append(ch)
        return '"' + "".join(out) + '"'
    return repr(v)
