"""Whole stores, plain and sharded: ``open_index``, the manifest and its routing, writes
across shards (a schema change too), a store kept open across replacements, maintenance.

Its modules: :mod:`~betree.stores.manifest`, :mod:`~betree.stores.sharded`,
:mod:`~betree.stores.shardwrite`,
:mod:`~betree.stores.live`, :mod:`~betree.stores.maintain`.
"""
