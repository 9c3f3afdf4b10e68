"""The PB+tree: per-attribute predicate index for ``< <= = != >= >`` on disk pages."""

from pbtree.tree import OPS, PBTree, key_domain, list_tree_names

__all__ = ["OPS", "PBTree", "key_domain", "list_tree_names"]
