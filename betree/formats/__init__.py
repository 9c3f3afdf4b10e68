"""The texts bexdb reads and writes beside its pages: JSON Lines events and results,
and subscriptions' metadata (checked, bounded, stored as compact JSON).

Its modules: :mod:`~betree.formats.jsonl`, :mod:`~betree.formats.metadata`.
"""
