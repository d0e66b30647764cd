"""Through Spark Connect (the plan is only EXPLAIN text there) a join's change terms still read the other
side pruned by the change's join keys, and the refresh equals the oracle."""

from __future__ import annotations

import json
import random

import pytest
from deltalake import DeltaTable

from mvsink.definitions.catalog import Catalog
from mvsink.readers.arrow import read_view
from tests.spark.test_pruned_joins import BAND, LINEAR, Q3, _dims, _lineitems, _orders
from tests.support.cli import run_cli_process
from tests.support.delta import BASE, HOUR, delete_at, write_at
from tests.support.oracle import multiset, oracle
from tests.support.viewfiles import write_view


@pytest.mark.slow
def test_pruned_change_terms_through_spark_connect(env, tmp_path, monkeypatch, connect_url):
    monkeypatch.setenv("MVSINK_INCREMENTAL_PRUNE_MIN_BYTES", "0")
    data, views = env
    rng = random.Random(12)
    _dims(data, rng)
    for b in range(10):
        keys = range(1 + b * BAND, 1 + (b + 1) * BAND)
        write_at(data / "orders", _orders(rng, keys), BASE)
        write_at(data / "lineitem", _lineitems(rng, keys), BASE)
    paths = {n: str(data / n) for n in ("customer", "orders", "lineitem")}
    cases = {
        "lin": (LINEAR, ("orders", "lineitem"), "incremental"),
        "q3": (Q3, ("customer", "orders", "lineitem"), "incremental:aggregate"),
    }
    for name, (query, sources, _) in cases.items():
        write_view(views, name, query=query, sources={s: s for s in sources}, target=f"views/{name}", as_of=BASE)
    catalog = Catalog(views)
    for k, r in enumerate((BASE + HOUR, BASE + 2 * HOUR)):
        if k:  # RF1 + RF2: new orders on a band of new keys, the oldest orders deleted
            new = range(1000, 1006)
            write_at(data / "orders", _orders(rng, new), r - 60_000)
            write_at(data / "lineitem", _lineitems(rng, new), r - 50_000)
            delete_at(data / "orders", "o_orderkey <= 3", r - 40_000)
            delete_at(data / "lineitem", "l_orderkey <= 3", r - 30_000)
        for name, (query, sources, mode) in cases.items():
            out = run_cli_process(
                views, "refresh", name, "--at", str(r), "--remote", connect_url, "--json", timeout=300
            )
            res = json.loads(out.stdout)
            assert res["status"] == "appended" and res["mode"] == ("full" if k == 0 else mode), res
            assert multiset(read_view(catalog.get(name), as_of=r)) == oracle(
                query, {s: paths[s] for s in sources}, r
            ), name
            if k:
                files = len(DeltaTable(paths["lineitem"]).file_uris())
                assert res["reads"]["lineitem"]["files"] < files, res["reads"]
