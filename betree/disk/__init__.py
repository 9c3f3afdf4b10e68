"""The BE-Tree on disk: its page kinds, grid coordinates, the catalog records, the tree
itself, one write transaction, self-adjustment, the batch build, the change log,
every atom's grid span, subscriptions' metadata and schema evolution.  Imports only
:mod:`betree.lang`, :mod:`betree.formats` and the layers below.

Its modules: :mod:`~betree.disk.nodes`, :mod:`~betree.disk.grid`,
:mod:`~betree.disk.catalog`, :mod:`~betree.disk.tree`, :mod:`~betree.disk.adjust`,
:mod:`~betree.disk.adjustment`, :mod:`~betree.disk.writer`, :mod:`~betree.disk.changelog`,
:mod:`~betree.disk.atomspans`, :mod:`~betree.disk.bulk`, :mod:`~betree.disk.metadata`,
:mod:`~betree.disk.schemaedit`.
"""
