"""Tests of pbtree/: the PB+tree, its bulk build and its checker."""
