"""The ``ip`` attribute type: IPv4 and IPv6 addresses as order-preserving string keys.

Why strings: a CIDR block must be one range in the PB+tree and one interval in the
c-directory, so an address becomes a key whose order is the addresses' order (IPv4 as its
IPv4-mapped IPv6 form, ``::ffff:a.b.c.d``, so that the two are equal).  A 128-bit number
does not fit the index's 64-bit grid in a useful way: every IPv4 address has the same top
64 bits and would fall in one grid cell.  So the key names the address's segment of the
IPv6 order, then its bits in hex: ``0`` + 32 digits below ``::ffff:0:0``, ``1`` + 8 digits
for the IPv4-mapped block, ``2`` + 32 digits above it.  Keys of one segment have one length
and the segment letters sort in address order, so key order is address order, and the
grid's 8-byte prefix of an IPv4 key holds 28 bits of the address.

An IPv6 zone id (``fe80::1%eth0``) is refused, in literals and in events: :mod:`ipaddress`
accepts it but compares without it (``fe80::1%eth0`` equals ``fe80::1``), which would make
addresses of different links equal.

Cost: one :mod:`ipaddress` parse per event value and per literal.
"""

from __future__ import annotations

import ipaddress
import re

_MAPPED_LO = 0xFFFF_0000_0000
_MAPPED_HI = 0xFFFF_FFFF_FFFF


def key_of_int(n: int) -> str:
    """The key of the IPv6 address ``n`` (an IPv4-mapped one as its IPv4 address)."""
    if n < _MAPPED_LO:
        return f"0{n:032x}"
    if n <= _MAPPED_HI:
        return f"1{n - _MAPPED_LO:08x}"
    return f"2{n:032x}"


def key(text: str) -> str:
    """The key of an address written as text; ``ValueError`` (the reason) if it is not one."""
    if "%" in text:  # ipaddress takes an IPv6 zone id and ignores it in comparisons
        raise ValueError(f"{text!r} has a zone id (after %), which an ip value cannot hold")
    try:
        address = ipaddress.ip_address(text)
    except ValueError:
        raise ValueError(f"{text!r} is not an IPv4 or IPv6 address") from None
    n = int(address) + (_MAPPED_LO if address.version == 4 else 0)
    return key_of_int(n)


def cidr_range(text: str) -> tuple[str, str]:
    """The first and last keys of a CIDR block (``10.0.0.0/8``, ``2001:db8::/32``)."""
    if "%" in text:
        raise ValueError(f"{text!r} has a zone id (after %), which a CIDR block cannot hold")
    try:
        net = ipaddress.ip_network(text)
    except ValueError as exc:
        raise ValueError(f"{text!r} is not a CIDR block ({exc})") from None
    base = _MAPPED_LO if net.version == 4 else 0
    lo, hi = int(net.network_address) + base, int(net.broadcast_address) + base
    return key_of_int(lo), key_of_int(hi)


def address_of_key(k: str) -> str:
    """The address a key stands for, as text (an IPv4-mapped one as its IPv4 address)."""
    n = int(k[1:], 16)
    if k[0] == "1":
        return str(ipaddress.IPv4Address(n))
    return str(ipaddress.IPv6Address(n))


def _block_of(lo: str, hi: str) -> str | None:
    """The CIDR block whose first and last keys are ``lo`` and ``hi``, if they make one."""
    if lo[0] != hi[0]:
        return None
    first, last = (ipaddress.ip_address(address_of_key(k)) for k in (lo, hi))
    blocks = list(ipaddress.summarize_address_range(first, last))  # type: ignore[arg-type]
    return str(blocks[0]) if len(blocks) == 1 else None


_KEY = re.compile(r'"([012][0-9a-f]{8}(?:[0-9a-f]{24})?)"')
_RANGE = re.compile(r'(not )?between "([012][0-9a-f]+)" and "([012][0-9a-f]+)"')


def readable(text: str) -> str:
    """An ``ip`` atom's text (:meth:`~betree.lang.atoms.Atom.to_expr`, over keys) with the
    addresses instead of the keys, and a range that is one CIDR block as ``in cidr(...)``
    (what ``bexdb explain`` shows)."""

    def block(m: re.Match[str]) -> str:
        cidr = _block_of(m[2], m[3])
        if cidr is None:
            return f'{m[1] or ""}between "{address_of_key(m[2])}" and "{address_of_key(m[3])}"'
        return f'{m[1] or ""}in cidr("{cidr}")'

    return _KEY.sub(lambda m: f'"{address_of_key(m[1])}"', _RANGE.sub(block, text))
