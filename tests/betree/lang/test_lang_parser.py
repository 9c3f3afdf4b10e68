"""The expression parser and type checker against SPEC section 3, with exact error columns.

Every expected tree, column and reason below is written by hand from the SPEC text.
"""

from __future__ import annotations

import random
import time

import pytest

from betree.lang.expr import (
    And,
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
    StrFunc,
)
from betree.lang.lexicon import MAX_NESTING
from betree.lang.parser import compile_expr, parse
from betree.lang.schema import Schema
from betree.lang.tokens import token_columns
from storage.errors import InvalidInput
from tests.support.schemas import SPEC_EXAMPLE

A, B, C = BoolAttr("a"), BoolAttr("b"), BoolAttr("c")

FORMS: list[tuple[str, Node]] = [
    # comparisons, both ways round
    ("a < 1", Compare("a", "<", 1)),
    ("a <= 1", Compare("a", "<=", 1)),
    ("a > 1", Compare("a", ">", 1)),
    ("a >= 1", Compare("a", ">=", 1)),
    ("a = 1", Compare("a", "=", 1)),
    ("a <> 1", Compare("a", "!=", 1)),
    ("a != 1", Compare("a", "!=", 1)),
    ("1 < a", Compare("a", ">", 1)),
    ("1 <= a", Compare("a", ">=", 1)),
    ("1 > a", Compare("a", "<", 1)),
    ("1 >= a", Compare("a", "<=", 1)),
    ("1 = a", Compare("a", "=", 1)),
    ("1 <> a", Compare("a", "!=", 1)),
    ("'x' != a", Compare("a", "!=", "x")),
    ("a<1", Compare("a", "<", 1)),
    ("a<-1", Compare("a", "<", -1)),
    ("a<>-1", Compare("a", "!=", -1)),
    ("a = true", Compare("a", "=", True)),
    ("a <> false", Compare("a", "!=", False)),
    ("true = a", Compare("a", "=", True)),
    # literals
    ("a = -5", Compare("a", "=", -5)),
    ("a = -0", Compare("a", "=", 0)),
    ("a = 9223372036854775807", Compare("a", "=", 2**63 - 1)),
    ("a = -9223372036854775808", Compare("a", "=", -(2**63))),
    ("a = 1.", Compare("a", "=", 1.0)),
    ("a = 1.5e3", Compare("a", "=", 1500.0)),
    ("a = 1E-2", Compare("a", "=", 0.01)),
    ("a = 2e0", Compare("a", "=", 2.0)),
    ("a = -2.5", Compare("a", "=", -2.5)),
    ("a = 1.e5", Compare("a", "=", 100000.0)),
    ("a = 1e-400", Compare("a", "=", 0.0)),  # underflow: the nearest double
    ("a = 0.1", Compare("a", "=", 0.1)),
    ('a = "x"', Compare("a", "=", "x")),
    ("a = 'x'", Compare("a", "=", "x")),
    ('a = ""', Compare("a", "=", "")),
    (r'a = "\\ \" \' \n \t \r \u00e9 \u20AC"', Compare("a", "=", "\\ \" ' \n \t \r é €")),
    (r"a = 'it\'s'", Compare("a", "=", "it's")),
    ('a = "it\'s"', Compare("a", "=", "it's")),
    (r'a = "\ud83d\ude00"', Compare("a", "=", "😀")),
    ('a = "😀 é"', Compare("a", "=", "😀 é")),
    # between
    ("a between 1 and 2", Between("a", 1, 2)),
    ("a between 1.5 and 2", Between("a", 1.5, 2)),
    ("a between 'a' and 'b'", Between("a", "a", "b")),
    ("a not between 1 and 2", Between("a", 1, 2, True)),
    ("a between 5 and 1", Between("a", 5, 1)),
    # membership
    ("a in (1, 2, 3)", InList("a", (1, 2, 3))),
    ("a in (1, 2.5)", InList("a", (1, 2.5))),
    ("a in ()", InList("a", ())),
    ("a in ( )", InList("a", ())),
    ("a in ('x', \"y\")", InList("a", ("x", "y"))),
    ("a not in (1)", InList("a", (1,), True)),
    ("a not in ()", InList("a", (), True)),
    ("1 in a", Contains("a", 1)),
    ("'x' in a", Contains("a", "x")),
    ("1 not in a", Contains("a", 1, True)),
    # list operators
    ("a one of (1, 2)", ListOp("a", "one_of", (1, 2))),
    ("a none of ('x')", ListOp("a", "none_of", ("x",))),
    ("a all of ()", ListOp("a", "all_of", ())),
    # null / empty / bool
    ("a is null", IsNull("a")),
    ("a is not null", IsNull("a", True)),
    ("a is empty", IsEmpty("a")),
    ("a", A),
    ("not a", Not(A)),
    # string functions
    ('starts_with(a, "p")', StrFunc("starts_with", "a", "p")),
    ("ends_with(a, 's')", StrFunc("ends_with", "a", "s")),
    ('contains(a, "")', StrFunc("contains", "a", "")),
    ('contains( a , "x" )', StrFunc("contains", "a", "x")),
    # constants and logic
    ("true", Const(True)),
    ("false", Const(False)),
    ("a and b", And((A, B))),
    ("a && b", And((A, B))),
    ("a or b", Or((A, B))),
    ("a || b", Or((A, B))),
    ("a&&b||c", Or((And((A, B)), C))),
    ("a or b and c", Or((A, And((B, C))))),
    ("a and b or c", Or((And((A, B)), C))),
    ("(a or b) and c", And((Or((A, B)), C))),
    ("not a and b", And((Not(A), B))),
    ("not (a and b)", Not(And((A, B)))),
    ("not not a", Not(Not(A))),
    ("not a = 1", Not(Compare("a", "=", 1))),
    ("a and b and c", And((A, B, C))),
    ("(a and b) and c", And((A, B, C))),
    ("a or (b or c)", Or((A, B, C))),
    ("((a))", A),
    ("true and a", And((Const(True), A))),
    ("not true", Not(Const(True))),
    # case-insensitive keywords, case-sensitive identifiers
    ("A BETWEEN 1 AND 2", Between("A", 1, 2)),
    ("x IS NOT NULL", IsNull("x", True)),
    ("x Is Empty", IsEmpty("x")),
    ('Starts_With(s, "x")', StrFunc("starts_with", "s", "x")),
    ("TRUE Or FALSE", Or((Const(True), Const(False)))),
    ("a One Of (1)", ListOp("a", "one_of", (1,))),
    ("NOT a AnD b", And((Not(A), B))),
    ("1 NOT IN a", Contains("a", 1, True)),
    ("Price = 1 and price = 2", And((Compare("Price", "=", 1), Compare("price", "=", 2)))),
    ("a-b_c9 = 1", Compare("a-b_c9", "=", 1)),
    ("_x = 1", Compare("_x", "=", 1)),
    ("andy = 1", Compare("andy", "=", 1)),
    ("nullable", BoolAttr("nullable")),
    ("not-in = 1", Compare("not-in", "=", 1)),
    ("\ta\n=\r\n1 ", Compare("a", "=", 1)),
]


@pytest.mark.parametrize(("text", "tree"), FORMS, ids=[t for t, _ in FORMS])
def test_every_form_parses(text: str, tree: Node) -> None:
    assert parse(text) == tree


def test_float_literal_is_the_nearest_double() -> None:
    node = parse("f = 9007199254740993.0")
    assert isinstance(node, Compare)
    assert node.value == 9007199254740992.0 and isinstance(node.value, float)
    node = parse("f = 9007199254740993")  # an int literal stays exact
    assert isinstance(node, Compare)
    assert node.value == 9007199254740993 and isinstance(node.value, int)


# (text, column, reason or the start of it)
SYNTAX_ERRORS: list[tuple[str, int, str]] = [
    # strings
    (r's = "ab\q"', 8, r"invalid escape \q in string literal"),
    (r's = "\x41"', 6, r"invalid escape \x in string literal"),
    (r's = "\u12"', 6, r"\u must be followed by four hex digits"),
    (r's = "\u12G4"', 6, r"\u must be followed by four hex digits"),
    (r"s = '\0'", 6, r"invalid escape \0 in string literal"),
    (r's = "é\q"', 7, r"invalid escape \q in string literal"),
    (r's = "ok" and t = "\b"', 19, r"invalid escape \b in string literal"),
    (r's = "\ud83d"', 5, "string literal holds a lone surrogate"),
    ('s = "abc', 5, "unterminated string literal"),
    ("s = 'abc", 5, "unterminated string literal"),
    (r's = "abc\"', 5, "unterminated string literal"),
    # numbers
    ("a = .5", 5, "a number must start with a digit"),
    ("a in (1, .5)", 10, "a number must start with a digit"),
    ("a = - 1", 5, "a minus sign must be followed directly by digits"),
    ("a > -x", 5, "a minus sign must be followed directly by digits"),
    ("a = 9223372036854775808", 5, "integer literal 9223372036854775808 is outside"),
    ("a = -9223372036854775809", 5, "integer literal -9223372036854775809 is outside"),
    ("a in (1, 99999999999999999999)", 10, "integer literal"),
    ("a = 1e309", 5, "float literal 1e309 overflows a double"),
    ("a = -1.5e400", 5, "float literal -1.5e400 overflows a double"),
    ("a = 12abc", 5, 'malformed number "12abc"'),
    ("a = 1.5.3", 5, 'malformed number "1.5.3"'),
    ("a = 1e", 5, 'malformed number "1e"'),
    ("a = 1e+", 5, 'malformed number "1e"'),
    ("a = 1_000", 5, 'malformed number "1_000"'),
    # reserved words used as attribute names
    ("and = 1", 1, '"and" is a reserved word and cannot name an attribute'),
    ("AND = 1", 1, '"AND" is a reserved word and cannot name an attribute'),
    ("a = 1 or null = 2", 10, '"null" is a reserved word'),
    ("Between > 3", 1, '"Between" is a reserved word'),
    ("1 in empty", 6, '"empty" is a reserved word'),
    ("x is null and in = 3", 15, '"in" is a reserved word'),
    ("not = 3", 1, '"not" is a reserved word'),
    ("contains = 'x'", 1, '"contains" is a reserved word'),
    ("one of (1)", 1, 'unexpected "one", expected an attribute'),
    ("3 < of", 5, '"of" is a reserved word'),
    ('starts_with(true, "x")', 13, '"true" is a reserved word'),
    # unbalanced parentheses
    ("(a = 1", 1, '"(" is never closed'),
    ("((a = 1)", 1, '"(" is never closed'),
    ("(a = 1 and (b", 12, '"(" is never closed'),
    ("a = 1)", 6, 'unexpected ")"'),
    ("(a = 1))", 8, 'unexpected ")"'),
    (")", 1, 'unexpected ")"'),
    ("()", 2, 'unexpected ")"'),
    ("(a = 1 b)", 8, 'unexpected "b", expected ")"'),
    # trailing garbage and missing pieces
    ("a = 1 b", 7, 'unexpected "b"'),
    ("a = 1 2", 7, 'unexpected "2"'),
    ("a = 1 and", 10, "unexpected end of expression"),
    ("a =", 4, "unexpected end of expression"),
    ("", 1, "unexpected end of expression"),
    ("   ", 4, "unexpected end of expression"),
    ("a b", 3, 'unexpected "b", expected an operator'),
    ("a = b", 5, 'unexpected "b", expected a literal (comparing two attributes'),
    ("a = null", 5, 'unexpected "null", expected a literal'),
    ("a == 1", 4, 'unexpected "="'),
    ("1", 2, "unexpected end of expression"),
    ("1 and a", 3, 'unexpected "and", expected a comparison operator or "in"'),
    ("1 < 2", 5, 'unexpected "2", expected an attribute name'),
    ("a not 3", 7, 'unexpected "3", expected "in", "between", "like" or "matches"'),
    ("a is", 5, "unexpected end of expression"),
    ("a is not empty", 10, 'unexpected "empty", expected "null"'),
    ("a is nothing", 6, 'unexpected "nothing"'),
    ("a one (1)", 7, 'unexpected "(", expected "of"'),
    ("a in 1", 6, 'unexpected "1", expected "(" to open a list'),
    ("a in (1,)", 9, 'unexpected ")", expected a number or a string'),
    ("a in (1 2)", 9, 'unexpected "2", expected "," or ")"'),
    ("a in (true)", 7, 'unexpected "true", expected a number or a string'),
    ("a in (1", 8, "unexpected end of expression"),
    ("a in (1, 'x')", 10, "a list mixes strings and numbers"),
    ("a in ('x', 2.5)", 12, "a list mixes strings and numbers"),
    ("starts_with(a, 3)", 16, 'unexpected "3", expected a string literal'),
    ('starts_with(a "x")', 15, 'unexpected ""x"", expected ","'),
    ('starts_with(a, "x"', 19, "unexpected end of expression"),
    ("starts_with", 1, 'unexpected "starts_with"'),
    ("geo_within_radius(1, 2)", 1, "geo_within_radius takes 3 or 5 arguments, not 2"),
    ("nearby(1, 2, 3)", 1, 'unknown function "nearby"'),
    ("a = 1 and a (b)", 11, 'unknown function "a"'),
    ("true in a", 1, '"in" needs a number or a string before it'),
    ("a between 1 and 'x'", 17, '"between" needs two numbers or two strings'),
    ("a between true and 1", 11, '"between" needs two numbers or two strings'),
    # "between" takes the word "and" only
    ("a between 1 && 2", 13, '"between" takes the word "and", not "&&"'),
    ("a between 1 or 2", 13, 'unexpected "or", expected "and"'),
    # characters that are not part of the language
    ("a = 1 & b", 7, 'unexpected character "&"'),
    ("a = 1 | b", 7, 'unexpected character "|"'),
    ("a ≥ 3", 3, 'unexpected character "≥"'),
    ("prïce = 1", 3, 'unexpected character "ï"'),
    ("a = 1 ; b", 7, 'unexpected character ";"'),
    ("a =\u00a01", 4, "unexpected character U+00A0"),
    ("a. = 1", 2, 'unexpected character "."'),
    ("a = ²", 5, 'unexpected character "²"'),  # a Unicode digit is not a number
    ("a in (1, ١)", 10, 'unexpected character "١"'),
    ("a = 1١", 6, 'unexpected character "١"'),
    # columns count code points after non-ASCII text
    ('s = "héllo" and )', 17, 'unexpected ")"'),
    ('s = "😀" )', 9, 'unexpected ")"'),
    ('s = "😀😀" and t = .5', 18, "a number must start with a digit"),
    ("s = '日本語' or t = 1 1", 20, 'unexpected "1"'),
]


@pytest.mark.parametrize(
    ("text", "column", "reason"), SYNTAX_ERRORS, ids=[t for t, _, _ in SYNTAX_ERRORS]
)
def test_syntax_errors_have_column_and_reason(text: str, column: int, reason: str) -> None:
    with pytest.raises(ExpressionError) as info:
        parse(text)
    err = info.value
    assert isinstance(err, InvalidInput)
    assert err.column == column, err.reason
    assert err.reason.startswith(reason), err.reason
    assert str(err).startswith(f"column {column}: {reason}")


def test_error_reasons_quoted_exactly() -> None:
    with pytest.raises(ExpressionError) as info:
        parse("(a = 1))")
    assert info.value.reason == 'unexpected ")"'
    assert info.value.hint == 'there is no "(" to close'


def test_token_columns_count_code_points() -> None:
    assert token_columns('x = "😀" and é') == [1, 3, 5, 9, 13]


def test_nesting_is_bounded() -> None:
    deep = "(" * MAX_NESTING + "a" + ")" * MAX_NESTING
    assert parse(deep) == A
    assert parse("not " * MAX_NESTING + "a") is not None
    with pytest.raises(ExpressionError) as info:
        parse("x and " + "(" * (MAX_NESTING + 1) + "a" + ")" * (MAX_NESTING + 1))
    assert info.value.column == 7 + MAX_NESTING
    assert "nests deeper than" in info.value.reason
    with pytest.raises(ExpressionError):
        parse("not " * 5000 + "a")


def test_non_string_input_is_rejected() -> None:
    with pytest.raises(ExpressionError):
        parse(42)  # type: ignore[arg-type]


# -- type checking against a schema -------------------------------------------------------------

SCHEMA = Schema.from_json(
    {
        "attributes": {
            **SPEC_EXAMPLE["attributes"],
            "stock": {"type": "int", "allow_undefined": False},
        }
    }
)

TYPES = {
    "int": "price",
    "float": "rating",
    "string": "genre",
    "bool": "hardcover",
    "int_list": "sizes",
    "string_list": "tags",
}
# A literal of each attribute type's own kind (for lists: of the element type).
OWN_LITERAL = {
    "int": "3",
    "float": "2.5",
    "string": '"x"',
    "bool": "true",
    "int_list": "3",
    "string_list": '"x"',
}
# Form templates ({a} the attribute, {v} a literal of its kind) and the types SPEC allows.
ORDERED = {"int", "float", "string"}
LISTS = {"int_list", "string_list"}
TYPE_TABLE: list[tuple[str, set[str]]] = [
    ("{a} < {v}", ORDERED),
    ("{a} <= {v}", ORDERED),
    ("{a} > {v}", ORDERED),
    ("{a} >= {v}", ORDERED),
    ("{v} < {a}", ORDERED),
    ("{a} = {v}", ORDERED | {"bool"}),
    ("{a} <> {v}", ORDERED | {"bool"}),
    ("{a} != {v}", ORDERED | {"bool"}),
    ("{v} = {a}", ORDERED | {"bool"}),
    ("{a} between {v} and {v}", ORDERED),
    ("{a} not between {v} and {v}", ORDERED),
    ("{a} in ({v}, {v})", ORDERED),
    ("{a} not in ({v})", ORDERED),
    ("{a} in ()", ORDERED),
    ("{v} in {a}", LISTS),
    ("{v} not in {a}", LISTS),
    ("{a} one of ({v}, {v})", LISTS),
    ("{a} none of ({v})", LISTS),
    ("{a} all of ({v})", LISTS),
    ("{a} one of ()", LISTS),
    ("{a} is null", set(TYPES)),
    ("{a} is not null", set(TYPES)),
    ("{a} is empty", LISTS),
    ("{a}", {"bool"}),
    ("not {a}", {"bool"}),
    ('starts_with({a}, "p")', {"string"}),
    ('ends_with({a}, "p")', {"string"}),
    ('contains({a}, "p")', {"string"}),
]
TYPE_CASES = [
    (form.format(a=TYPES[t], v=OWN_LITERAL[t]), t in allowed)
    for form, allowed in TYPE_TABLE
    for t in TYPES
]


@pytest.mark.parametrize(("text", "valid"), TYPE_CASES, ids=[t for t, _ in TYPE_CASES])
def test_operator_type_table(text: str, valid: bool) -> None:
    if valid:
        assert compile_expr(text, SCHEMA) == parse(text)
    else:
        with pytest.raises(ExpressionError):
            compile_expr(text, SCHEMA)


# (text, column, exact reason)
TYPE_ERRORS: list[tuple[str, int, str]] = [
    ("pricee > 3", 1, 'unknown attribute "pricee"'),
    ('price = "x"', 9, 'string literal compared to int attribute "price"'),
    ("genre > 3", 9, 'int literal compared to string attribute "genre"'),
    ("genre > 3.5", 9, 'float literal compared to string attribute "genre"'),
    ("price = true", 9, 'bool literal compared to int attribute "price"'),
    ("hardcover = 1", 13, 'int literal compared to bool attribute "hardcover"'),
    ('"x" = price', 1, 'string literal compared to int attribute "price"'),
    ("hardcover < true", 11, 'operator "<" does not apply to bool attribute "hardcover"'),
    ("sizes = 1", 7, 'operator "=" does not apply to int_list attribute "sizes"'),
    ("tags <> 'x'", 6, 'operator "<>" does not apply to string_list attribute "tags"'),
    ("price between 1 and 'x'", 21, 'string literal compared to int attribute "price"'),
    ("price between 'a' and 2", 15, 'string literal compared to int attribute "price"'),
    ("hardcover between 1 and 2", 11, '"between" does not apply to bool attribute "hardcover"'),
    ("price in (1, 2, 'x')", 17, 'string literal compared to int attribute "price"'),
    ("sizes in (1)", 7, '"in (…)" does not apply to int_list attribute "sizes"'),
    ("1 in price", 3, '"v in a" does not apply to int attribute "price"'),
    ("1.5 in sizes", 1, 'float literal compared to int_list attribute "sizes"'),
    ("2.0 in sizes", 1, 'float literal compared to int_list attribute "sizes"'),
    ("'x' in sizes", 1, 'string literal compared to int_list attribute "sizes"'),
    ("1 in tags", 1, 'int literal compared to string_list attribute "tags"'),
    ("sizes one of (1, 2.5)", 18, 'float literal compared to int_list attribute "sizes"'),
    ("tags all of ('a', 1)", 19, 'int literal compared to string_list attribute "tags"'),
    ("tags none of (1)", 15, 'int literal compared to string_list attribute "tags"'),
    ("price one of (1)", 7, '"one of" does not apply to int attribute "price"'),
    ("price is empty", 7, '"is empty" does not apply to int attribute "price"'),
    ("price", 1, 'int attribute "price" cannot stand alone as a condition'),
    ("not tags", 5, 'string_list attribute "tags" cannot stand alone as a condition'),
    ("starts_with(price, 'x')", 1, '"starts_with" does not apply to int attribute "price"'),
    (
        "stock is null",
        7,
        '"is null" is invalid on attribute "stock", which cannot be undefined '
        "(allow_undefined is false)",
    ),
    (
        "stock > 1 and stock is not null",
        21,
        '"is not null" is invalid on attribute "stock", which cannot be undefined '
        "(allow_undefined is false)",
    ),
    ('genre = "日本" and pricee > 3', 18, 'unknown attribute "pricee"'),
]


@pytest.mark.parametrize(
    ("text", "column", "reason"), TYPE_ERRORS, ids=[t for t, _, _ in TYPE_ERRORS]
)
def test_type_errors(text: str, column: int, reason: str) -> None:
    with pytest.raises(ExpressionError) as info:
        compile_expr(text, SCHEMA)
    assert (info.value.column, info.value.reason[: len(reason)]) == (column, reason)


def test_unknown_attribute_hint() -> None:
    with pytest.raises(ExpressionError) as info:
        compile_expr("pricee > 3", SCHEMA)
    assert info.value.hint == 'did you mean "price"?'


@pytest.mark.parametrize(
    "text",
    [
        "price > 2.5",  # float literal on an int attribute
        "price in (1, 2.5)",
        "rating = 3",  # int literal on a float attribute
        "rating between 1 and 2.5",
        "hardcover = false",
        "hardcover <> true",
        "not hardcover",
        "sizes one of (1, -2)",
        "tags none of ()",
        "stock > 1",
        "price is null and rating is not null",
        "sizes is empty or 3 not in sizes",
        "true or false",
    ],
)
def test_valid_under_schema(text: str) -> None:
    assert compile_expr(text, SCHEMA) == parse(text)


def test_parse_speed() -> None:
    """Report the parse rate; the assertion is a loose floor for shared CI machines."""
    rng = random.Random(7)
    texts = []
    for _ in range(2000):
        a = [rng.randrange(1000) for _ in range(5)]
        texts.append(
            f"a{a[0]} between {rng.randrange(10)} and {rng.randrange(10, 30)} and "
            f"a{a[1]} = {rng.randrange(10)} and a{a[2]} in (1, 4, 9) and a{a[3]} <= 30 "
            f"and not (a{a[4]} > 2)"
        )
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        for t in texts:
            parse(t)
        best = min(best, time.perf_counter() - start)
    rate = len(texts) / best
    print(f"\nparse: {rate:,.0f} expressions/s")
    assert rate > 5_000
