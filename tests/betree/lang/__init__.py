"""Tests of betree/lang/: the expression language."""
