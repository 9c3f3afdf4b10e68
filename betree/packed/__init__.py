"""Packed views: a snapshot's BE-Tree as numpy arrays, batches 64 events a word, views
kept across writes, a sharded store's views joined, interval matching and when to
use it, and the C heap of the processes that match in batches.

Its modules: :mod:`~betree.packed.heap`, :mod:`~betree.packed.delta`,
:mod:`~betree.packed.flat`, :mod:`~betree.packed.flatbatch`,
:mod:`~betree.packed.joined`, :mod:`~betree.packed.bounds`,
:mod:`~betree.packed.intervals`, :mod:`~betree.packed.ranging`.
"""
