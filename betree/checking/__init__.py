"""Looking into an index: ``check()`` over packed arrays, and ``explain``'s display of
atoms in the user's terms.

Its modules: :mod:`~betree.checking.check` (its atom catalog pass:
:mod:`~betree.checking.atomrecords`), :mod:`~betree.checking.explained`.
"""
