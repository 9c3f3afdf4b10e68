"""Events in streams: a stream matched batch by batch, and the same across worker
processes (``bexdb match --jobs N``).

Its modules: :mod:`~betree.streams.stream`, :mod:`~betree.streams.parallel`.
"""
