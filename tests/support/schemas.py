"""Schemas several test modules share, each defined once.

The random workload's schema lives with its generator (:mod:`tests.support.workload`), the
edge values' with them (:mod:`tests.support.edges`). Treat these as read-only.
"""

from __future__ import annotations

from typing import Any

# the README's and the command-line tests' two attributes
BOOKS: dict[str, Any] = {"attributes": {"price": {"type": "int"}, "genre": {"type": "string"}}}

# SPEC section 2's example
SPEC_EXAMPLE: dict[str, Any] = {
    "attributes": {
        "price": {"type": "int", "min": 0, "max": 100000},
        "rating": {"type": "float"},
        "genre": {"type": "string"},
        "hardcover": {"type": "bool"},
        "tags": {"type": "string_list"},
        "sizes": {"type": "int_list"},
    }
}

# one attribute of every basic type
EVERY_TYPE: dict[str, Any] = {
    "attributes": {
        "i": {"type": "int"},
        "f": {"type": "float"},
        "s": {"type": "string"},
        "b": {"type": "bool"},
        "il": {"type": "int_list"},
        "sl": {"type": "string_list"},
    }
}

# ... and ``r``, which an event must define
EVERY_TYPE_R_REQUIRED: dict[str, Any] = {
    "attributes": {**EVERY_TYPE["attributes"], "r": {"type": "int", "allow_undefined": False}}
}
