"""bexdb's expression language: what a subscription says, apart from how it is indexed.

The package depends on nothing of the index (only on :mod:`storage.errors` for its error
types); the index, the loaders and the tools use it.  Its modules, each importing only the
ones listed before it:

- :mod:`~betree.lang.bounded`: dicts that forget their older half when full;
- :mod:`~betree.lang.lexicon`: keywords, type names, operators, the integer range;
- :mod:`~betree.lang.tokens`: a text cut into tokens, their kinds and columns;
- :mod:`~betree.lang.patterns`: ``like`` and ``matches`` on RE2, and a pattern's literal
  prefix;
- :mod:`~betree.lang.paths`: nested events flattened into dotted attribute paths;
- :mod:`~betree.lang.arrays`: arrays of objects for ``any PATH (…)``: the schema seen
  from an element, an event's elements with their values;
- :mod:`~betree.lang.ipaddr`: ``ip`` addresses and CIDR blocks as order-preserving keys;
- :mod:`~betree.lang.special`: the be-tree library's functions (segments, frequency caps,
  geo radius): their meaning, the box a radius spans, their event values;
- :mod:`~betree.lang.expr`: the syntax tree and the brute-force reference evaluator;
- :mod:`~betree.lang.calls`: the library's function calls: their arguments, the attributes
  they read;
- :mod:`~betree.lang.fold`: case folding of an expression's constants and an event's
  values, for attributes declared ``fold_case``;
- :mod:`~betree.lang.parser`: text to tree (:func:`~betree.lang.parser.parse`), type-checked
  against a schema (:func:`~betree.lang.parser.compile_expr`);
- :mod:`~betree.lang.schema`: attribute types, event validation, schema inference;
- :mod:`~betree.lang.holds`: what each test atom checks on an event;
- :mod:`~betree.lang.atoms`: the indexable atoms, and the atoms of each atomic form;
- :mod:`~betree.lang.compound`: the clauses of the library's functions and of ``any``;
- :mod:`~betree.lang.dnf`: a tree to clauses of atoms (:func:`~betree.lang.dnf.to_clauses`);
- :mod:`~betree.lang.conjuncts`: the clause of a plain conjunction from its remembered
  pieces, the bulk load's fast path.

Importing the package imports none of them: import the module you need.
"""
