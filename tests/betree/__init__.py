"""Tests of betree/: the index, its matchers, stores and streams."""
