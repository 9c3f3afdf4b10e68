"""Tests of storage/: the page store, LMDB, staging, damage and long keys."""
