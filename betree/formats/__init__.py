"""The texts bexdb reads and writes beside its pages: JSON Lines events and results.

Its module: :mod:`~betree.formats.jsonl`.
"""
