"""bexdb's Boolean-expression index: ``from betree import Index`` (README: Python API), and
``open_index(path)`` for a store that may be sharded (:mod:`betree.stores.sharded`).

``Index`` and ``open_index`` are imported on first use (PEP 562), so importing the
expression language (:mod:`betree.lang`: the parser, the schema) does not load the index,
the BE-Tree and the PB+trees with it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from betree.index import Index
    from betree.stores.sharded import open_index

__all__ = ["Index", "open_index"]


def __getattr__(name: str) -> Any:
    if name == "Index":
        from betree.index import Index

        return Index
    if name == "open_index":
        from betree.stores.sharded import open_index

        return open_index
    raise AttributeError(f"module 'betree' has no attribute {name!r}")
