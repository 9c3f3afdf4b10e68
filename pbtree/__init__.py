"""The PB+tree: per-attribute predicate index for ``< <= = != >= >`` on disk pages."""

from pbtree.keys import OPS, key_domain
from pbtree.tree import PBTree, list_tree_names

__all__ = ["OPS", "PBTree", "key_domain", "list_tree_names"]
