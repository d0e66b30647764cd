"""The benchmark's change streams (bench/streams.py): dbgen's RF1/RF2 key scheme and the new rows' domains."""

from __future__ import annotations

import numpy as np
import pyarrow.compute as pc
import pytest

from bench.streams import (
    CURRENTDATE,
    ODATE_MAX,
    STARTDATE,
    Domains,
    key_predicate,
    key_seq,
    mk_sparse,
    new_orders,
    orders_count,
    pair_orders,
    predicate_mask,
    recent_band,
    retail_price_cents,
    rf_band,
    supplier_of,
)

pytestmark = pytest.mark.unit

SF = 0.01
N = orders_count(SF)
ROWCNT = pair_orders(SF)
INITIAL = mk_sparse(np.arange(1, N + 1), 0)


def _pairs(first_pair: int, pairs: int):
    return rf_band((first_pair - 1) * ROWCNT + 1, pairs * ROWCNT, rowcnt=ROWCNT, population=N)


def test_sizes_follow_dbgen():
    assert orders_count(1) == 1_500_000 and pair_orders(1) == 1_500  # 0.1 % of the orders per function
    assert orders_count(0.1) == 150_000 and pair_orders(0.1) == 150
    assert N == 1_000 * ROWCNT == 15_000


def test_the_initial_population_uses_8_of_every_32_keys():
    # what tpchgen-cli (and dbgen) generate: 1-7, 32-39, 64-71, ...
    assert INITIAL[:16].tolist() == [1, 2, 3, 4, 5, 6, 7, 32, 33, 34, 35, 36, 37, 38, 39, 64]
    assert set(key_seq(INITIAL).tolist()) == {0}
    assert np.all(np.diff(INITIAL) > 0)
    assert INITIAL[-1] < 4 * N + 32


def test_rf1_fills_the_gaps_and_rf2_deletes_the_oldest_keys():
    band = _pairs(1, 1)
    assert len(band.insert_keys) == len(band.delete_keys) == ROWCNT
    # pair 1 at any SF: rows 1..rowcnt, RF1 with sequence 1 (dbgen: 1 + upd_num / 1000), RF2 with 0
    assert band.insert_keys[:9].tolist() == [9, 10, 11, 12, 13, 14, 15, 40, 41]
    assert band.delete_keys.tolist() == INITIAL[:ROWCNT].tolist()
    assert not np.isin(band.insert_keys, INITIAL).any()  # new orders: keys not in the population
    assert len(np.unique(band.insert_keys)) == ROWCNT
    assert np.isin(band.delete_keys, INITIAL).all()  # RF2 deletes orders that exist
    assert band.pairs == 1


def test_the_bands_are_narrow_and_advance():
    first, second = _pairs(1, 1), _pairs(2, 1)
    for b in (first, second):
        for keys in (b.insert_keys, b.delete_keys):
            assert np.all(np.diff(keys) > 0)
            assert keys.max() - keys.min() < 4 * ROWCNT + 32  # about 4 keys per row
            assert keys.max() - keys.min() < 0.01 * INITIAL[-1]  # 0.1 % of the orders, under 1 % of the keys
    assert second.insert_keys.min() > first.insert_keys.max()
    assert second.delete_keys.min() > first.delete_keys.max()
    # RF1 and RF2 of a pair share the band: the new orders land where the deleted ones were
    assert abs(int(first.insert_keys.min()) - int(first.delete_keys.min())) < 32
    # rounds of several pairs are the pairs' bands end to end
    assert _pairs(1, 2).insert_keys.tolist() == first.insert_keys.tolist() + second.insert_keys.tolist()


def test_a_run_of_pairs_never_reinserts_or_deletes_twice():
    present = set(INITIAL.tolist())
    inserted: set[int] = set()
    for p in range(1, 41):
        b = _pairs(p, 1)
        assert not (set(b.insert_keys.tolist()) & present)
        assert set(b.delete_keys.tolist()) <= present
        present |= set(b.insert_keys.tolist())
        present -= set(b.delete_keys.tolist())
        inserted |= set(b.insert_keys.tolist())
    assert len(present) == N  # RF1 and RF2 keep the orders count
    assert len(inserted) == 40 * ROWCNT


def test_the_stream_stops_before_dbgens_pair_1000():
    _pairs(999, 1)
    with pytest.raises(ValueError, match="used up"):
        _pairs(999, 2)


def test_the_delete_predicate_selects_exactly_the_band():
    band = _pairs(3, 2)
    pred = key_predicate("o_orderkey", band.delete_keys)
    lo, hi = int(band.delete_keys.min()), int(band.delete_keys.max())
    assert pred == f"o_orderkey >= {lo} AND o_orderkey <= {hi} AND (o_orderkey / 8) % 4 = 0"
    table_keys = np.concatenate([INITIAL, _pairs(1, 5).insert_keys])  # after RF1 of the same pairs
    assert table_keys[predicate_mask(table_keys, lo, hi, 0)].tolist() == band.delete_keys.tolist()
    assert predicate_mask(band.insert_keys, lo, hi, 0).sum() == 0
    with pytest.raises(ValueError):
        key_predicate("o_orderkey", np.concatenate([band.delete_keys, band.insert_keys]))


def test_rf3_updates_the_most_recent_orders():
    lo, hi = recent_band(N, 15)
    assert hi == INITIAL[-1]
    assert ((INITIAL >= lo) & (INITIAL <= hi)).sum() == 15


def test_new_rows_take_tpch_value_domains():
    dom = Domains.at(SF)
    assert (dom.customers, dom.parts, dom.suppliers, dom.clerks) == (1_500, 2_000, 100, 1_000)
    keys = _pairs(1, 10).insert_keys
    comments = np.asarray(["a comment"], dtype=object)
    orders, lines = new_orders(keys, dom, np.random.default_rng(7), order_comments=comments, line_comments=comments)
    o, li = orders.to_pydict(), lines.to_pydict()
    assert o["o_orderkey"] == keys.tolist()
    cust = np.asarray(o["o_custkey"])
    assert cust.min() >= 1 and cust.max() <= dom.customers and not np.any(cust % 3 == 0)
    counts = np.bincount(np.searchsorted(keys, li["l_orderkey"]), minlength=len(keys))
    assert counts.min() >= 1 and counts.max() <= 7
    assert set(counts.tolist()) == set(range(1, 8))  # 1-7 lineitems, each count among 150 orders
    odate = orders.column("o_orderdate").cast("int32").to_numpy()
    assert odate.min() >= STARTDATE and odate.max() <= ODATE_MAX
    part = np.asarray(li["l_partkey"])
    assert part.min() >= 1 and part.max() <= dom.parts
    qty = np.asarray([float(x) for x in li["l_quantity"]])
    assert qty.min() >= 1 and qty.max() <= 50
    price = np.asarray([round(float(x) * 100) for x in li["l_extendedprice"]])
    assert price.tolist() == (retail_price_cents(part) * qty.astype(np.int64)).tolist()
    assert {float(x) for x in li["l_discount"]} <= {i / 100 for i in range(11)}
    assert {float(x) for x in li["l_tax"]} <= {i / 100 for i in range(9)}
    ship = lines.column("l_shipdate").cast("int32").to_numpy()
    receipt = lines.column("l_receiptdate").cast("int32").to_numpy()
    assert np.all(receipt - ship >= 1) and np.all(receipt - ship <= 30)
    status = np.asarray(li["l_linestatus"])
    assert np.array_equal(status == "O", ship > CURRENTDATE)
    flag = np.asarray(li["l_returnflag"])
    assert np.array_equal(flag == "N", receipt > CURRENTDATE)
    assert set(o["o_orderstatus"]) <= {"O", "F", "P"}
    assert pc.min(orders.column("o_totalprice")).as_py() > 0
    assert all(c.startswith("Clerk#") and len(c) == 15 for c in o["o_clerk"])


def test_part_supplier_bridge_and_retail_price_match_tpchgen():
    # a tpchgen-cli SF 0.1 lineitem: partkey 15519, suppkey 785, quantity 17, extendedprice 24386.67
    assert retail_price_cents(np.asarray([15519]))[0] * 17 == 2_438_667
    assert supplier_of(np.asarray([15519]), np.asarray([1]), 1_000)[0] == 785


def test_read_stats_come_from_the_reports_reads():
    from bench.rows import mode_name, read_stats

    assert read_stats({"bytes": 5, "files": 1}, None) == (None, None, None)  # nothing reported: None
    reads = {"orders": {"bytes": 7, "files": 1}, "lineitem": {"bytes": 3, "files": 2}}
    assert read_stats({"rows_added": 1, "reads": {}}, {"reads": reads}) == (
        10,
        3,
        {"orders": {"bytes_read": 7, "files_read": 1}, "lineitem": {"bytes_read": 3, "files_read": 2}},
    )
    assert [mode_name(m) for m in ("full", "incremental", "incremental:aggregate", "incremental:topk")] == [
        "full",
        "incremental",
        "aggregate",
        "topk",
    ]


def test_dims_updates_a_moving_band_of_parts_partsupp_rows_and_suppliers(tmp_path):
    from decimal import Decimal

    import pyarrow as pa
    from deltalake import DeltaTable, write_deltalake

    from bench.streams import make_stream

    dec = pa.decimal128(15, 2)
    parts = pa.table(
        {"p_partkey": pa.array(range(1, 2001), pa.int64()), "p_retailprice": pa.array([Decimal("100.00")] * 2000, dec)}
    )
    ps = pa.table(
        {
            "ps_partkey": pa.array([k for k in range(1, 2001) for _ in range(4)], pa.int64()),
            "ps_suppkey": pa.array([s for _ in range(1, 2001) for s in range(1, 5)], pa.int64()),
            "ps_availqty": pa.array([1, 5, 5, 5] * 2000, pa.int32()),
            "ps_supplycost": pa.array([Decimal("10.00")] * 8000, dec),
        }
    )
    sup = pa.table(
        {"s_suppkey": pa.array(range(1, 101), pa.int64()), "s_acctbal": pa.array([Decimal("-5.00")] * 100, dec)}
    )
    for name, t in (("part", parts), ("partsupp", ps), ("supplier", sup)):
        write_deltalake(str(tmp_path / "src" / name), t)
    stream = make_stream("dims", tmp_path, 0.01)  # 2,000 parts, 100 suppliers
    assert stream.bands(0.001, 1) == ((1, 2), (1, 1))
    assert stream.bands(0.001, 2) == ((3, 4), (2, 2))  # (the band moves on)
    got = stream.apply(0.001, 2, 1_767_225_600_000)
    assert (got["parts_updated"], got["partsupp_updated"], got["suppliers_updated"]) == (2, 8, 1)
    p = DeltaTable(str(tmp_path / "src" / "part")).to_pyarrow_table().sort_by("p_partkey")
    assert p.column("p_retailprice").to_pylist()[:5] == [Decimal("100.00")] * 2 + [Decimal("101.00")] * 2 + [
        Decimal("100.00")
    ]
    q = (
        DeltaTable(str(tmp_path / "src" / "partsupp"))
        .to_pyarrow_table()
        .sort_by([("ps_partkey", "ascending"), ("ps_suppkey", "ascending")])
    )
    assert q.column("ps_supplycost").to_pylist()[8:16] == [Decimal("10.10")] * 8
    assert q.column("ps_supplycost").to_pylist()[16] == Decimal("10.00")
    assert q.column("ps_availqty").to_pylist()[8:12] == [1, 4, 4, 4]  # (never below 1)
    s = DeltaTable(str(tmp_path / "src" / "supplier")).to_pyarrow_table().sort_by("s_suppkey")
    assert s.column("s_acctbal").to_pylist()[:3] == [Decimal("-5.00"), Decimal("-4.00"), Decimal("-5.00")]
