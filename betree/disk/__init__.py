"""The BE-Tree on disk: its page kinds, grid coordinates, the catalog records, the tree
itself, one write transaction, self-adjustment, the batch build, the change log and
every atom's grid span.  Imports only :mod:`betree.lang` and the layers below.

Its modules: :mod:`~betree.disk.nodes`, :mod:`~betree.disk.grid`,
:mod:`~betree.disk.catalog`, :mod:`~betree.disk.tree`, :mod:`~betree.disk.adjust`,
:mod:`~betree.disk.writer`, :mod:`~betree.disk.changelog`,
:mod:`~betree.disk.atomspans`, :mod:`~betree.disk.bulk`.
"""
