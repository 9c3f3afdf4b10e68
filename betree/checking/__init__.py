"""Looking into an index: ``check()`` over packed arrays, and ``explain``'s display of
atoms in the user's terms.

Its modules: :mod:`~betree.checking.check`, :mod:`~betree.checking.explained`.
"""
