"""The expression language's tokens: what a text is cut into, each token's kind, and
where each token stands (for error columns).

Cost: one regular-expression pass per text (``str.split`` for a plain text: about twice
as fast), one dict lookup per token for its kind.
"""

from __future__ import annotations

import itertools
import re

from betree.lang.lexicon import KEYWORDS
from pbtree.operators import OPS

# One token per match (leading whitespace skipped): an identifier or keyword, an operator, a
# number-like run (a number followed by letters, digits or dots is one malformed token, not
# two), a string, ".5", or any other single non-space character (always an error).
TOKEN_RE = re.compile(
    r"""[ \t\r\n\f\v]*(
      [A-Za-z_][A-Za-z0-9_-]*(?:\.[A-Za-z_][A-Za-z0-9_-]*)*
    | <=|>=|<>|!=|&&|\|\||[(),<>=]
    | -?[0-9]+(?:\.[0-9]*)?(?:[eE][+-]?[0-9]+)?[A-Za-z0-9_.]*
    | "[^"\\]*(?:\\.[^"\\]*)*"
    | '[^'\\]*(?:\\.[^'\\]*)*'
    | \.[0-9]+
    | [^ \t\r\n\f\v]
    )""",
    re.VERBOSE | re.DOTALL,
)
_FINDALL = TOKEN_RE.findall
# A text made only of spaces, "(", ")", ",", and identifiers, integers and operators each
# delimited by those (or the ends): then its tokens are what str.split() gives once "(", ")"
# and "," are padded with spaces, about twice as fast as _FINDALL.  (Each alternative below
# is one whole token of TOKEN_RE; the lookaheads reject a token glued to another, such as
# "a<3" or "5-3"; anything else, such as a string, a float or a tab, fails the match.)
PLAIN_MATCH = re.compile(
    r"""(?:[ (),]*+(?:
        [A-Za-z_][A-Za-z0-9_-]*+(?:\.[A-Za-z_][A-Za-z0-9_-]*+)*+ (?![<>=!.])
      | -?+[0-9][A-Za-z0-9_]*+ (?![<>=!-])
      | (?:<[=>]?+|>=?+|!=|=) (?![<>=!A-Za-z0-9_-])
    ))*+[ (),]*+""",
    re.VERBOSE,
).fullmatch


def _case_variants(word: str) -> list[str]:
    pools = [(c.lower(), c.upper()) if c.isalpha() else (c,) for c in word]
    return ["".join(p) for p in itertools.product(*pools)]


# Token text -> kind, for keywords (every spelling) and operators; other tokens map to None.
_KIND_OF: dict[str, str] = {
    **{op: op for op in OPS}, "<>": "!=",
    "&&": "and", "||": "or", "(": "(", ")": ")", ",": ",",
}  # fmt: skip
for _kw in KEYWORDS:
    for _v in _case_variants(_kw):
        _KIND_OF[_v] = _kw
KIND_GET = _KIND_OF.get


def tokens(text: str) -> list[str]:
    """The token strings of ``text``: ``TOKEN_RE.findall(text)``, faster on a plain text."""
    if PLAIN_MATCH(text):
        return text.replace("(", " ( ").replace(")", " ) ").replace(",", " , ").split()
    return _FINDALL(text)


def token_columns(text: str) -> list[int]:
    """The 1-based column of every token of ``text`` (for error reports and tests)."""
    return [m.start(1) + 1 for m in TOKEN_RE.finditer(text)]
