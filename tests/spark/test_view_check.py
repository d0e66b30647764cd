"""``mvsink check [VIEWS_DIR]``: every view file of a folder parsed, analysed against its sources on real Spark,
refused when non-deterministic, its sources' refresh modes reported; exit 2 with one line per bad view."""

from __future__ import annotations

import json
import random
import subprocess

import pytest

from mvsink.cli.app import main
from tests.support.data import inc_customers, inc_orders
from tests.support.delta import BASE, write_at
from tests.support.viewfiles import write_view

pytestmark = pytest.mark.spark

GOOD = "SELECT status, count(*) AS n FROM orders GROUP BY status"
BAD = {  # name: (query, target)
    "unknown_column": ("SELECT id, no_such_col FROM orders", "x1"),
    "unknown_source": ("SELECT o.id FROM orders o JOIN ordrs r ON o.id = r.id", "x2"),
    "rand_view": ("SELECT id, rand() AS r FROM orders", "x3"),
    # a function the view file's lexical check does not see (a quoted name): Spark's analysed plan refuses it
    "quoted_rand": ("SELECT id, `rand`() AS r FROM orders", "x4"),
}


def _write_bad(folder, *names: str) -> None:
    """The views of :data:`BAD` named, over ``orders``, in ``folder``."""
    for name in names:
        query, target = BAD[name]
        write_view(folder, name, query=query, sources={"orders": "orders"}, as_of=BASE, target=target)


@pytest.fixture
def folder(env):
    """orders and customers tables, and a views folder with a good view and a view over it."""
    data, views = env
    rng = random.Random(7)
    write_at(data / "orders", inc_orders(rng, 0, 10), BASE)
    write_at(data / "customers", inc_customers(rng), BASE + 1)
    write_view(views, "good", query=GOOD, sources={"orders": "orders"}, target="views/good", as_of=BASE)
    write_view(
        views,
        "joined",
        query="SELECT o.id, c.region FROM orders o JOIN customers c ON o.cust = c.id",
        sources={"orders": "orders", "customers": "customers"},
        target="views/joined",
        as_of=BASE,
    )
    # over a view that has no table yet: analysed over the upstream query's columns
    write_view(
        views,
        "over",
        query="SELECT status FROM up WHERE n > 1",
        sources={"up": {"view": "good"}},
        target="views/over",
        as_of=BASE,
    )
    return views


def _check(capsys, *args: str) -> tuple[int, str, str]:
    rc = main(["check", *args])
    got = capsys.readouterr()
    return rc, got.out, got.err


def test_a_folder_of_good_views_passes_with_each_sources_mode(spark, folder, capsys):
    rc, out, err = _check(capsys, str(folder))
    assert rc == 0, out + err
    assert f"ok   {folder}/good.yaml: view good" in out
    assert "a change of `orders` → aggregate state" in out
    assert "a change of `customers` → incremental (linear)" in out
    assert "refresh modes not reported: upstream view(s) good have no table yet" in out
    assert "3 view file(s) checked" in out and "all good" in out
    assert err == ""
    # --json: the same verdicts
    rc, out, _ = _check(capsys, "--views-dir", str(folder), "--json")
    doc = json.loads(out)
    assert rc == 0 and doc["ok"] is True
    assert [v["view"] for v in doc["views"]] == ["good", "joined", "over"]


def test_each_bad_view_gets_its_own_line_and_exit_2(spark, folder, capsys):
    _write_bad(folder, "unknown_column", "unknown_source", "rand_view", "quoted_rand")
    write_view(folder, "missing_table", query="SELECT id FROM t", sources={"t": "nowhere"}, as_of=BASE, target="x5")
    (folder / "broken.yaml").write_text("name: broken\nquery: [unclosed\n")
    # the view over `good` still checks: the bad views do not spoil the good ones
    rc, out, err = _check(capsys, str(folder))
    assert rc == 2, out
    fails = {line.split(":", 1)[0].removeprefix("FAIL ").strip(): line for line in out.splitlines() if "FAIL" in line}
    assert sorted(fails) == sorted(
        str(folder / f"{n}.yaml")
        for n in ("unknown_column", "unknown_source", "rand_view", "quoted_rand", "missing_table", "broken")
    ), out
    line = fails[str(folder / "unknown_column.yaml")]
    assert "view unknown_column: the query does not analyse" in line and "no_such_col" in line and "Fix:" in line
    line = fails[str(folder / "unknown_source.yaml")]
    assert "ordrs" in line and "sources are available as ['orders']" in line
    line = fails[str(folder / "rand_view.yaml")]
    assert "uses the non-deterministic function rand()" in line and "Fix:" in line
    line = fails[str(folder / "quoted_rand.yaml")]
    assert "view quoted_rand: the query is not deterministic" in line and "Fix:" in line
    line = fails[str(folder / "missing_table.yaml")]
    assert "source 't': no Delta table at" in line and "Fix:" in line
    line = fails[str(folder / "broken.yaml")]
    assert "broken.yaml" in line and "YAML" in line.upper() and "Fix" in line
    for good in ("good", "joined", "over"):
        assert f"ok   {folder}/{good}.yaml: view {good}" in out
    assert "9 view file(s) checked" in out and "6 with problems" in out
    assert err.strip() == "mvsink: error: 6 view file(s) have problems (the FAIL lines above)"


def test_a_source_one_view_declares_is_not_visible_to_the_next(spark, folder, capsys):
    # `a_first` registers `customers`; `b_later` reads it without declaring it: refused all the same
    write_view(
        folder,
        "b_later",
        query="SELECT id FROM orders o JOIN customers c ON o.cust = c.id",
        sources={"orders": "orders"},
        as_of=BASE,
        target="x6",
    )
    rc, out, _ = _check(capsys, str(folder))
    assert rc == 2
    assert f"FAIL {folder}/b_later.yaml: view b_later: the query does not analyse" in out, out


def test_an_empty_or_missing_folder(spark, tmp_path, capsys):
    rc, out, _ = _check(capsys, str(tmp_path))
    assert rc == 0 and "0 view file(s) checked" in out
    rc, _, err = _check(capsys, str(tmp_path / "nope"))
    assert rc == 2 and "does not exist" in err


def test_a_query_whose_columns_no_longer_fit_its_table(spark, folder, capsys):
    from mvsink.definitions.catalog import Catalog
    from mvsink.write.runners import refresh

    catalog = Catalog(folder)
    assert refresh(catalog.get("good"), BASE + 3_600_000, catalog=catalog, runner="inprocess", spark=spark).status == (
        "appended"
    )
    rc, out, _ = _check(capsys, str(folder))
    assert rc == 0, out
    write_view(  # the same view, its count renamed: the next refresh would be refused
        folder,
        "good",
        query="SELECT status, count(*) AS how_many FROM orders GROUP BY status",
        sources={"orders": "orders"},
        target="views/good",
        as_of=BASE,
    )
    rc, out, _ = _check(capsys, str(folder))
    assert rc == 2
    line = next(x for x in out.splitlines() if x.startswith("FAIL"))
    assert line.startswith(f"FAIL {folder}/good.yaml: view good: the query now returns columns") and "Fix:" in line


@pytest.mark.slow
def test_over_spark_connect_the_same_verdicts(folder, connect_url):
    """``--remote``: the analysis on a Spark Connect server (a client process of its own), the same verdicts."""
    from tests.support.cli import CLI

    _write_bad(folder, "unknown_column", "quoted_rand")
    proc = subprocess.run(
        [*CLI, "check", str(folder), "--remote", connect_url], capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 2, proc.stdout + proc.stderr[-3000:]
    fails = sorted(line.split(":", 1)[0] for line in proc.stdout.splitlines() if line.startswith("FAIL"))
    assert fails == [f"FAIL {folder}/quoted_rand.yaml", f"FAIL {folder}/unknown_column.yaml"], proc.stdout
    assert "view quoted_rand: the query is not deterministic" in proc.stdout
    assert "no_such_col" in proc.stdout and "a change of `orders` → aggregate state" in proc.stdout
