"""Matching on the pages: the direct atoms of phase 1 by kind, the same-element atoms of
``any``, a reader's per-snapshot state, and ``match_many``'s one pass over the pages.

Its modules: :mod:`~betree.matching.directkinds`, :mod:`~betree.matching.sameelement`,
:mod:`~betree.matching.direct`, :mod:`~betree.matching.snapshot`,
:mod:`~betree.matching.batch`.
"""
