"""Schema evolution on a live store (``bexdb schema STORE --add FILE``, ``PUT /schema``).

The rules, which keep every stored subscription meaning what it meant:

* The change is a schema document (README: Language).  Each attribute it names is either
  **new** (added), or **existing**: then its entry is the attribute's whole new spec, and only
  ``min``/``max`` (hints) may differ from the stored one.  Attributes it does not name stay.
* Refused (:class:`SchemaConflict`, naming the attribute; nothing written): another ``type``,
  ``fold_case`` or ``allow_undefined`` for an existing attribute (each changes how stored
  expressions or events are read); a new attribute with ``allow_undefined: false`` (events
  matched today would be rejected); a new attribute that is a dotted prefix of an existing
  one (``user`` beside ``user.age``: nested events would be rejected).  A malformed document
  is :class:`~storage.errors.InvalidInput`.
* **Hints** steer only where *new* p-nodes cut an attribute's space: a top bucket records the
  range its children halve when it is made, and matching and insertion descend by the
  buckets' stored ranges, never by the schema's.  So changed hints apply to p-nodes made from
  then on; existing ones keep theirs and every answer stays exact.  The root record keeps
  every range an attribute's hints ever had (``former_hints``), so that ``check()`` still
  holds each top bucket to a range the schema gave (:mod:`betree.checking.check`).
* Every reader sees the change from its next snapshot on: the root record's
  ``schema_version`` is counted up in the same transaction, and
  :meth:`betree.engine.Engine.schema_in` compares it once per commit generation.

A plain store changes in one write transaction; a sharded one (every shard holds the schema;
the manifest does not) through the write journal of :mod:`betree.stores.shardwrite`, all shards or
none, also after ``kill -9``.  Cost: one small write transaction per shard (plus the
journal's fsyncs when sharded); nothing is rebuilt.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from betree.disk import catalog, grid
from betree.lang.schema import AttrSpec, Schema
from storage.errors import InvalidInput
from storage.txn import WriteTxn

if TYPE_CHECKING:
    from betree.index import Index


class SchemaConflict(InvalidInput):
    """A schema change that would alter what stored subscriptions mean (exit 2, HTTP 409)."""


def merged(current: Schema, doc: Any) -> tuple[Schema, dict[str, list[str]]]:
    """The schema ``doc`` makes of ``current`` under the rules above, and what changed:
    ``{"added": [names], "hints": [names whose min/max changed]}``."""
    change = Schema.from_json(doc)  # InvalidInput naming the attribute, if malformed
    specs = dict(current.attributes)
    added: list[str] = []
    hints: list[str] = []
    for name, spec in change.attributes.items():
        old = specs.get(name)
        if old is None:
            _may_add(current, spec)
            added.append(name)
        else:
            for key in ("type", "fold_case", "allow_undefined"):
                was, wanted = json.dumps(getattr(old, key)), json.dumps(getattr(spec, key))
                if was != wanted:
                    raise SchemaConflict(
                        f'schema: attribute "{name}": {key} is {was} in the store and cannot '
                        f"change to {wanted} (stored subscriptions would change meaning)",
                        hint="only attributes can be added and min/max changed; "
                        "rebuild the store (`bexdb export`, `bexdb load --schema`) otherwise",
                    )
            if (spec.min, spec.max) == (old.min, old.max):
                continue
            hints.append(name)
        specs[name] = spec
    return Schema(specs.values()), {"added": added, "hints": hints}


def _may_add(current: Schema, spec: AttrSpec) -> None:
    if not spec.allow_undefined:
        raise SchemaConflict(
            f'schema: new attribute "{spec.name}" cannot have allow_undefined false '
            "(events without it, matched today, would be rejected)"
        )
    inside = [n for n in current.attributes if n.startswith(spec.name + ".")]
    if inside:
        raise SchemaConflict(
            f'schema: new attribute "{spec.name}" is a prefix of the existing "{inside[0]}" '
            "(events nesting it would be rejected)"
        )


def write(txn: WriteTxn, new: Schema) -> None:
    """Store ``new`` in ``txn``: the schema record, the hint ranges it replaces (kept in
    ``former_hints``) and ``schema_version`` + 1 in the root record."""
    old = Schema.from_json(catalog.load_schema(txn))
    rec = catalog.root_record(txn)
    former: dict[str, list[list[int]]] = rec.get("former_hints", {})
    for name, spec in old.attributes.items():
        was = list(_hint(spec))
        if was != list(_hint(new.attributes[name])) and was not in former.get(name, []):
            former.setdefault(name, []).append(was)
    rec["former_hints"] = former
    rec["schema_version"] = rec.get("schema_version", 0) + 1
    catalog.put_root(txn, rec)
    catalog.put_schema(txn, new.to_json())


def _hint(spec: AttrSpec) -> tuple[int, int]:
    return grid.hint_range(grid.kind_of(spec.type), spec.min, spec.max)


def add_to_schema(index: Index, doc: Any) -> dict[str, list[str]]:
    """Apply ``doc`` to a plain store's schema (one write transaction, read and changed
    under the writer lock, so that two changes never lose one another); returns
    :func:`merged`'s summary.  Raises :class:`SchemaConflict` or ``InvalidInput``,
    nothing written.

    >>> add_to_schema(idx, {"attributes": {"country": {"type": "string"}}})  # doctest: +SKIP
    {'added': ['country'], 'hints': []}
    """
    with index.store.write() as txn:
        new, summary = merged(Schema.from_json(catalog.load_schema(txn)), doc)
        if summary["added"] or summary["hints"]:
            write(txn, new)
    index.engine.refresh_schema()
    return summary
