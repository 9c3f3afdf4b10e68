"""bexdb's Boolean-expression index: ``from betree import Index`` (SPEC section 8).

``Index`` is imported on first use (PEP 562), so importing the expression language
(:mod:`betree.lang`: the parser, the schema) does not load the index, the BE-Tree and the
PB+trees with it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from betree.index import Index

__all__ = ["Index"]


def __getattr__(name: str) -> Any:
    if name == "Index":
        from betree.index import Index

        return Index
    raise AttributeError(f"module 'betree' has no attribute {name!r}")
