"""Bearer tokens for ``bexdb serve --auth-file F``: who may read, who may also write.

The file holds one ``TOKEN read|write`` a line (blank lines and lines starting with ``#``
are skipped); a token is printable ASCII without spaces, as RFC 6750's ``b64token``
allows.  It is read once, when the service starts (restart it to change the tokens).  A
request names its token in ``Authorization: Bearer TOKEN``; the service answers 401
without a valid one and 403 to a ``read`` token asking to write.

A token is compared with every token of the file by :func:`hmac.compare_digest`, all of
them whatever matches, so that the time taken tells nothing of how much of a guess was
right (cost: a microsecond or so per token per request).  No message, error or log line
holds a token: a bad line of the file is named by its number only.
"""

from __future__ import annotations

import argparse
import hmac
import re

READ, WRITE = "read", "write"
Tokens = tuple[tuple[bytes, str], ...]

_TOKEN = re.compile(rb"[\x21-\x7e]+")


def auth_file(path: str) -> Tokens:
    """``--auth-file``: the tokens and roles of ``path``, checked while the arguments are
    parsed (a bad file is a usage error, exit 2, naming the line but not the token)."""
    try:
        with open(path, "rb") as fh:
            text = fh.read()
    except OSError as exc:
        raise argparse.ArgumentTypeError(f"{path}: cannot read it: {exc.strerror}") from None
    found: dict[bytes, str] = {}
    for n, line in enumerate(text.splitlines(), 1):
        fields = line.split()
        if not fields or fields[0].startswith(b"#"):
            continue
        if len(fields) != 2 or fields[1] not in (b"read", b"write"):
            raise argparse.ArgumentTypeError(
                f"{path}: line {n}: expected TOKEN read|write (a token without spaces, then "
                "its role)"
            )
        token, role = fields[0], fields[1].decode()
        if not _TOKEN.fullmatch(token):
            raise argparse.ArgumentTypeError(f"{path}: line {n}: a token is printable ASCII")
        if found.get(token, role) != role:
            raise argparse.ArgumentTypeError(f"{path}: line {n}: a token given two roles")
        found[token] = role
    if not found:
        raise argparse.ArgumentTypeError(f"{path}: no tokens (one TOKEN read|write a line)")
    return tuple(found.items())


def role(tokens: Tokens, authorization: bytes | None) -> str | None:
    """The role of the bearer token of an ``Authorization`` header, or None."""
    if authorization is None:
        return None
    scheme, _, given = authorization.strip().partition(b" ")
    if scheme.lower() != b"bearer":
        return None
    given = given.strip()
    found = None
    for token, granted in tokens:  # every one, whatever matches
        if hmac.compare_digest(given, token):
            found = granted
    return found
