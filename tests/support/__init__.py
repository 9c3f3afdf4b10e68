"""Helpers shared by the test modules: workloads and edge values, the brute-force oracles,
schemas, the CLI and HTTP drivers, the checker fixtures.

Test modules import from here and from the packages, never from one another
(``tests/test_architecture.py`` checks it), so that a test file can move or go without
breaking another.
"""
