"""``bexdb bench live --store S --workload W``: on a store built elsewhere (here by ``bexdb
load``), in place, through ``bexdb serve``: the writes are in the store itself afterwards
(not in a copy), under new ids, with the workload's expressions; the store checks, and the
results file has the frozen row and one a rate.  Never a timing assertion."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from betree.stores.sharded import open_index
from tools.bench.live import SPARE_IDS
from tools.cli import main


def test_bench_live_serves_an_existing_store_in_place(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "data"
    assert main(["gen", "--subs", "400", "--events", "300", str(data)]) == 0
    store = tmp_path / "store"
    load = ["load", str(store), str(data / "subs.jsonl"), "--schema", str(data / "schema.json")]
    assert main([*load, "--engine", "python", "--shards", "2"]) == 0
    out = tmp_path / "out"
    argv = ["bench", "live", "--store", str(store), "--workload", str(data), "--serve-only"]
    argv += ["--serve-rates", "20", "--serve-seconds", "1", "--serve-warmup", "20"]
    assert main([*argv, "--serve-cache-mb", "64", "--out", str(out)]) == 0
    doc = json.loads((out / "results.json").read_text())
    assert [r["mode"] for r in doc["rows"]] == ["serve, frozen", "serve, writer 20/s"]
    wrote = doc["rows"][1]["writes"]
    assert wrote > 0
    assert sorted(p.name for p in out.iterdir()) == ["results.json"]  # nothing copied
    exprs = [json.loads(line)["expr"] for line in (data / "subs.jsonl").open()]
    with open_index(store) as idx:
        idx.check()
        assert len(idx) == 400 + wrote
        new = sorted(i for i, _ in idx.subscriptions() if isinstance(i, int) and i >= SPARE_IDS)
        assert new == list(range(SPARE_IDS + 400, SPARE_IDS + 400 + wrote))
        assert [idx.expression(i) for i in new] == exprs[:wrote]
    assert "--store" in capsys.readouterr().out


def test_bench_live_store_wants_its_workload(tmp_path: Path) -> None:
    with pytest.raises(SystemExit, match="--store and --workload go together"):
        main(["bench", "live", "--store", str(tmp_path), "--out", str(tmp_path / "out")])
