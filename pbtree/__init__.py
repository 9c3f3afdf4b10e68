"""The PB+tree: per-attribute predicate index for ``< <= = != >= >`` on disk pages.

The package's names are loaded on first use (PEP 562), so that importing
:mod:`pbtree.operators`, the operator table the language reads, loads no tree and no page.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pbtree.keys import key_domain
    from pbtree.operators import OPS
    from pbtree.tree import PBTree, list_tree_names

__all__ = ["OPS", "PBTree", "key_domain", "list_tree_names"]
_HOME = {
    "OPS": "pbtree.operators",
    "PBTree": "pbtree.tree",
    "key_domain": "pbtree.keys",
    "list_tree_names": "pbtree.tree",
}


def __getattr__(name: str) -> Any:
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module 'pbtree' has no attribute {name!r}")
    return getattr(importlib.import_module(home), name)
