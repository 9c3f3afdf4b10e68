"""Matching while subscriptions change: per-commit state kept across commits
(:mod:`betree.snapshot`), packed views with a delta of what was written since."""

from __future__ import annotations

from pathlib import Path

from betree.index import Index

SCHEMA = {
    "attributes": {
        "n": {"type": "int"},
        "tags": {"type": "string_list"},
        "flag": {"type": "bool"},
    }
}


def test_a_commit_decodes_only_the_attributes_it_changed(tmp_path: Path) -> None:
    with Index.open(tmp_path, schema=SCHEMA) as idx:
        idx.subscribe_many([(1, '"a" in tags'), (2, "flag = true"), (3, "n > 3")])
        with idx.store.read() as txn:
            first = idx._snap(txn)["grouped"]
        assert sorted(first) == ["flag", "tags"]
        idx.subscribe(4, '"b" in tags')  # a new direct atom of tags only
        with idx.store.read() as txn:
            second = idx._snap(txn)["grouped"]
        assert idx._records.decoded == ["tags"]
        assert second["flag"] is first["flag"] and second["tags"] is not first["tags"]
        idx.subscribe(5, "n > 3 and flag = true")  # shares its atoms: no record changes
        with idx.store.read() as txn:
            assert idx._snap(txn)["grouped"]["tags"] is second["tags"]
        assert idx._records.decoded == []
        assert sorted(idx.match({"n": 4, "tags": ["b"], "flag": True})) == [2, 3, 4, 5]
        idx.unsubscribe(4)
        assert sorted(idx.match({"n": 4, "tags": ["b"], "flag": True})) == [2, 3, 5]
        idx.check()
