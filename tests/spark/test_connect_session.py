"""A write step through Spark Connect opens a session of its own and releases it when it ends (spark/connect.py:
``released_session``): the server keeps none of its temp views, and they are not dropped one round trip at a time."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import textwrap

import pytest

from mvsink.readers.arrow import read_view
from tests.support import aggdata
from tests.support.delta import BASE, HOUR, write_at
from tests.support.oracle import multiset, oracle
from tests.support.viewfiles import write_view

pytestmark = pytest.mark.spark

QUERY = (
    "SELECT c.region, count(*) AS n FROM customers c "
    "WHERE EXISTS (SELECT 1 FROM orders o WHERE o.cust = c.id AND o.qty > 1) GROUP BY c.region"
)

# A Connect client must not share its process with the tests' classic session: it runs in a process of its own.
CLIENT = textwrap.dedent(
    """
    import json, sys
    from pyspark.sql.connect.catalog import Catalog as ConnectCatalog
    from mvsink.definitions.catalog import Catalog
    from mvsink.spark import connect
    from mvsink.write.runners import refresh

    url, views, t = sys.argv[1], sys.argv[2], int(sys.argv[3])
    sessions, drops = [], []
    real = connect.released_session

    def spied(*a, **k):
        cm = real(*a, **k)
        class Wrap:
            def __enter__(self):
                s = cm.__enter__()
                sessions.append(s)
                return s
            def __exit__(self, *e):
                return cm.__exit__(*e)
        return Wrap()

    connect.released_session = spied
    real_drop = ConnectCatalog.dropTempView
    ConnectCatalog.dropTempView = lambda self, name: drops.append(name) or real_drop(self, name)
    catalog = Catalog(views)
    res = refresh(catalog.get("exists_agg"), t, catalog=catalog, runner="connect", remote=url)
    print("RESULT " + json.dumps({
        "status": res.status, "mode": res.mode, "sessions": len(sessions),
        "stopped": [s.is_stopped for s in sessions], "drops": drops,
    }))
    """
)


def _client(url: str, views, t: int) -> dict:
    proc = subprocess.run(
        [sys.executable, "-c", CLIENT, url, str(views), str(t)],
        capture_output=True,
        text=True,
        env={**os.environ},
        timeout=600,
    )
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")), None)
    assert proc.returncode == 0 and line, proc.stderr[-3000:]
    return json.loads(line[len("RESULT ") :])


def test_a_connect_write_step_releases_its_session(connect_url, env, monkeypatch):
    monkeypatch.setenv("MVSINK_INCREMENTAL_MAX_SCAN_RATIO", "1000")  # (a partitioned recompute, its temp views)
    monkeypatch.setenv("MVSINK_INCREMENTAL_MAX_FRACTION", "100")
    monkeypatch.setenv("MVSINK_SPARK_FREE", "false")  # (the write step on the server, every time)
    data, views = env
    rng = random.Random(7)
    orders, customers = aggdata.write_sources(data, rng, 30)
    write_view(
        views,
        "exists_agg",
        query=QUERY,
        sources={"orders": "orders", "customers": "customers"},
        target="views/exists_agg",
        as_of=BASE,
    )
    first = _client(connect_url, views, BASE + HOUR)
    assert (first["status"], first["mode"], first["sessions"], first["stopped"]) == ("appended", "full", 1, [True])
    write_at(orders, aggdata.agg_orders(rng, 30, 6), BASE + 2 * HOUR)
    t = BASE + 3 * HOUR
    second = _client(connect_url, views, t)
    assert second["mode"] == "incremental:aggregate", second
    assert second["stopped"] == [True], second  # (the session released: its temp views went with it) ...
    assert not any(d.startswith("__mv_part") for d in second["drops"]), second  # ... not dropped one by one
    from mvsink.definitions.catalog import Catalog

    view = Catalog(views).get("exists_agg")
    assert multiset(read_view(view, as_of=t)) == oracle(QUERY, {"orders": orders, "customers": customers}, t)
