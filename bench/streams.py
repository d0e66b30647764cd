"""Change streams of the TPC-H benchmarks: ``rf`` (TPC-H's refresh functions), ``rf3``, ``scattered`` and ``dims``.

``rf``: RF1 + RF2 pairs as the TPC-H specification (clause 2.27) and its reference generator dbgen define
them. RF1 inserts SF * 1,500 new orders (0.1 % of ORDERS) with 1-7 lineitems each; RF2 deletes SF * 1,500
old orders and their lineitems. The keys follow dbgen's sparse key scheme (TPC-H dbgen 2.x; cited from
the copy at github.com/electrum/tpch-dbgen, ``build.c``: ``mk_sparse``, ``mk_order``; ``dss.h``:
``MK_SPARSE``, ``SPARSE_BITS 2``, ``SPARSE_KEEP 3``, ``UPD_PCT 10``; ``driver.c``: the update loop,
``rowcnt = tdefs[ORDER_LINE].base / 10000 * scale * UPD_PCT``, ``minrow = upd_num * rowcnt + 1``;
``print.c``: ``pr_drange``):

    order key of row index i, sequence seq = ((((i >> 3) << 2) + seq) << 3) + (i & 7)

The initial population is rows i = 1 .. SF * 1,500,000 with seq 0: of every 32 keys only 8 are used
(1-7, 32-39, 64-71, ...). Update pair n (1-based) covers the rows i = (n - 1) * rowcnt + 1 .. n * rowcnt
with rowcnt = SF * 1,500: RF1 inserts them with seq 1 + n // 1000 (keys in the gaps, 9-15, 40-47, ...),
RF2 deletes them with seq n // 1000 (the initial population's keys, the oldest first). Both bands are
narrow (about 4 * rowcnt keys wide) and advance pair by pair. This module stops at 999 pairs (99.9 % of
the initial orders deleted): dbgen's pair 1,000 would delete keys of sequence 1 that no RF1 inserted.

The new rows' values are drawn by a seeded numpy generator over TPC-H's value domains (clause 4.2.3,
and dbgen's constants for what the clause leaves to it: ``rpb_routine`` for the retail price,
``PART_SUPP_BRIDGE`` for the supplier, the integer arithmetic of ``o_totalprice``); only the free-text
comments are sampled from the tpchgen-cli base rows (the same generator's text). tpchgen-cli, which
generates the base tables, has no update sets, and rows of a larger SF would carry customer, part and
supplier keys outside this SF's tables.

``rf3``: UPDATEs of ``l_extendedprice`` (+1 %) and ``l_discount`` (+0.01, back to 0.00 past 0.10) of
every lineitem of the most recent orders (the highest order keys: a narrow band), one commit per round.

``dims``: a price list update of the dimensions TPC-H's refresh functions leave alone: ``p_retailprice`` (+1 %) of a
band of parts, ``ps_supplycost`` (+1 %) and ``ps_availqty`` (-1, at least 1) of those parts' partsupp rows, and
``s_acctbal`` (+1.00) of a band of suppliers; ``rate`` of each table's parts and suppliers (at least one), the band
moving on each round; three commits (UPDATEs through delta-rs, rewriting the files that hold the band).

``scattered``: the benchmark's earlier change, kept as the adversarial case: the orders with
``o_orderkey % m`` equal to one residue updated, those of the next residue deleted (with their
lineitems), and copies of the next inserted under new keys: keys scattered over every file.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

STREAMS = ("rf", "rf3", "scattered")  # (changes of orders and lineitem: every benchmark's tables hold them)
DIMENSION_STREAMS = ("dims",)  # (part, partsupp and supplier: bench.tpch22's tables)
PARTS_PER_SF = 200_000
SUPPLIERS_PER_SF = 10_000

# dbgen: dss.h and driver.c
SPARSE_BITS = 2
SPARSE_KEEP = 3
UPD_PCT = 10
ORDERS_PER_SF = 1_500_000  # tdefs[ORDER].base (150,000) * ORDERS_PER_CUST (10)
MAX_PAIRS = 10_000 // UPD_PCT  # pairs before RF2 has deleted the whole initial population

# dates as days since 1970-01-01 (Arrow date32)
STARTDATE = 8035  # 1992-01-01
CURRENTDATE = 9298  # 1995-06-17 (dbgen 95168)
ODATE_MAX = STARTDATE + 2557 - (121 + 30) - 1  # 1998-08-02: TOTDATE - (L_SDTE_MAX + L_RDTE_MAX) - 1
PRIORITIES = ("1-URGENT", "2-HIGH", "3-MEDIUM", "4-NOT SPECIFIED", "5-LOW")
INSTRUCTIONS = ("DELIVER IN PERSON", "COLLECT COD", "NONE", "TAKE BACK RETURN")
MODES = ("REG AIR", "AIR", "RAIL", "SHIP", "TRUCK", "MAIL", "FOB")

ORDERS_SCHEMA = pa.schema(
    [
        ("o_orderkey", pa.int64()),
        ("o_custkey", pa.int64()),
        ("o_orderstatus", pa.string()),
        ("o_totalprice", pa.decimal128(15, 2)),
        ("o_orderdate", pa.date32()),
        ("o_orderpriority", pa.string()),
        ("o_clerk", pa.string()),
        ("o_shippriority", pa.int32()),
        ("o_comment", pa.string()),
    ]
)
LINEITEM_SCHEMA = pa.schema(
    [
        ("l_orderkey", pa.int64()),
        ("l_partkey", pa.int64()),
        ("l_suppkey", pa.int64()),
        ("l_linenumber", pa.int32()),
        ("l_quantity", pa.decimal128(15, 2)),
        ("l_extendedprice", pa.decimal128(15, 2)),
        ("l_discount", pa.decimal128(15, 2)),
        ("l_tax", pa.decimal128(15, 2)),
        ("l_returnflag", pa.string()),
        ("l_linestatus", pa.string()),
        ("l_shipdate", pa.date32()),
        ("l_commitdate", pa.date32()),
        ("l_receiptdate", pa.date32()),
        ("l_shipinstruct", pa.string()),
        ("l_shipmode", pa.string()),
        ("l_comment", pa.string()),
    ]
)


# ---------------------------------------------------------------- keys (pure)


def mk_sparse(i: Any, seq: Any) -> np.ndarray:
    """dbgen's order key of row index ``i`` in sequence ``seq`` (build.c ``mk_sparse``)."""
    i = np.asarray(i, dtype=np.int64)
    low = i & ((1 << SPARSE_KEEP) - 1)
    return ((((i >> SPARSE_KEEP) << SPARSE_BITS) + np.asarray(seq, dtype=np.int64)) << SPARSE_KEEP) + low


def key_seq(keys: Any) -> np.ndarray:
    """The sequence bits of order keys (0: the initial population; 1: RF1 of the first 999 pairs)."""
    return (np.asarray(keys, dtype=np.int64) >> SPARSE_KEEP) & ((1 << SPARSE_BITS) - 1)


def orders_count(sf: float) -> int:
    """Orders of the initial population (tpchgen-cli and dbgen: SF * 1,500,000)."""
    return int(round(sf * ORDERS_PER_SF))


def pair_orders(sf: float) -> int:
    """Orders one RF1 inserts and one RF2 deletes: SF * 1,500 (driver.c ``rowcnt``), at least 1."""
    return max(1, int(round(ORDERS_PER_SF / 10_000 * sf * UPD_PCT)))


@dataclasses.dataclass(frozen=True)
class RFBand:
    """The rows ``first`` .. ``last`` (1-based indices) of the update sets: RF1 inserts ``insert_keys``,
    RF2 deletes ``delete_keys``."""

    first: int
    last: int
    rowcnt: int
    insert_keys: np.ndarray
    delete_keys: np.ndarray

    @property
    def pairs(self) -> float:
        return (self.last - self.first + 1) / self.rowcnt


def rf_band(first: int, count: int, *, rowcnt: int, population: int) -> RFBand:
    """Keys of the update-set rows ``first`` .. ``first + count - 1``: row i belongs to pair
    n = (i - 1) // rowcnt + 1; RF1 inserts it with seq 1 + n // 1000, RF2 deletes it with seq n // 1000
    (driver.c, print.c ``pr_drange``)."""
    last = first + count - 1
    if first < 1 or count < 0:
        raise ValueError(f"rf_band: first={first}, count={count}")
    limit = min(population, (MAX_PAIRS - 1) * rowcnt)
    if last > limit:
        raise ValueError(
            f"the rf stream has used up its update sets ({limit:,} orders: {MAX_PAIRS - 1} pairs of {rowcnt:,}; "
            f"from pair {MAX_PAIRS} on dbgen's RF2 keys are not in the table): rows up to {last:,} asked for; "
            "lower --rates, --repeat or --warmup"
        )
    i = np.arange(first, last + 1, dtype=np.int64)
    n = (i - 1) // rowcnt + 1
    return RFBand(
        first=first,
        last=last,
        rowcnt=rowcnt,
        insert_keys=mk_sparse(i, 1 + n // MAX_PAIRS),
        delete_keys=mk_sparse(i, n // MAX_PAIRS),
    )


def key_predicate(column: str, keys: np.ndarray) -> str:
    """A delta-rs SQL predicate true for exactly ``keys`` among dbgen keys: their range (which Delta's file
    statistics prune on) and their sequence bits (``keys`` must share one)."""
    seqs = np.unique(key_seq(keys))
    if len(keys) == 0 or len(seqs) != 1:
        raise ValueError(f"key_predicate: {len(keys)} keys with sequence bits {seqs.tolist()}")
    lo, hi = int(keys.min()), int(keys.max())
    return f"{column} >= {lo} AND {column} <= {hi} AND ({column} / 8) % 4 = {int(seqs[0])}"


def predicate_mask(keys: np.ndarray, lo: int, hi: int, seq: int) -> np.ndarray:
    """What :func:`key_predicate`'s SQL selects among ``keys`` (for the tests)."""
    keys = np.asarray(keys, dtype=np.int64)
    return (keys >= lo) & (keys <= hi) & ((keys // 8) % 4 == seq)


def recent_band(population: int, count: int) -> tuple[int, int]:
    """rf3: the key range of the ``count`` most recent orders of the initial population (the highest keys)."""
    count = min(max(count, 1), population)
    return int(mk_sparse(population - count + 1, 0)), int(mk_sparse(population, 0))


# ---------------------------------------------------------------- rows (pure)


@dataclasses.dataclass(frozen=True)
class Domains:
    """TPC-H's value domains at a scale factor (tpchgen-cli's table sizes)."""

    customers: int
    parts: int
    suppliers: int
    clerks: int

    @classmethod
    def at(cls, sf: float) -> Domains:
        return cls(
            customers=max(1, int(round(150_000 * sf))),
            parts=max(1, int(round(200_000 * sf))),
            suppliers=max(1, int(round(10_000 * sf))),
            clerks=max(int(round(1_000 * sf)), 1_000),  # MAX(scale * O_CLRK_SCL, O_CLRK_SCL)
        )


def retail_price_cents(partkey: np.ndarray) -> np.ndarray:
    """P_RETAILPRICE in cents (build.c ``rpb_routine``)."""
    return 90_000 + (partkey // 10) % 20_001 + (partkey % 1_000) * 100


def supplier_of(partkey: np.ndarray, s: np.ndarray, suppliers: int) -> np.ndarray:
    """L_SUPPKEY: the s-th (0..3) supplier of a part (build.c ``PART_SUPP_BRIDGE``)."""
    return (partkey + s * (suppliers // 4 + (partkey - 1) // suppliers)) % suppliers + 1


def _decimal(cents: np.ndarray) -> pa.Array:
    """decimal128(15, 2) from integer cents (no Python Decimal per value)."""
    cents = np.ascontiguousarray(cents, dtype=np.int64)
    words = np.empty((len(cents), 2), dtype=np.int64)
    words[:, 0] = cents
    words[:, 1] = np.where(cents < 0, -1, 0)
    return pa.Array.from_buffers(pa.decimal128(15, 2), len(cents), [None, pa.py_buffer(words.tobytes())])


def _pick(rng: np.random.Generator, values: tuple[str, ...] | np.ndarray, n: int) -> pa.Array:
    return pa.array(np.asarray(values, dtype=object)[rng.integers(0, len(values), n)], pa.string())


def new_orders(
    keys: np.ndarray,
    dom: Domains,
    rng: np.random.Generator,
    *,
    order_comments: np.ndarray,
    line_comments: np.ndarray,
) -> tuple[pa.Table, pa.Table]:
    """New ORDERS rows with ``keys`` and their LINEITEM rows (build.c ``mk_order``'s domains)."""
    n = len(keys)
    keys = np.asarray(keys, dtype=np.int64)
    cust = rng.integers(1, dom.customers + 1, n)
    cust = np.where(cust % 3 == 0, np.where(cust + 1 <= dom.customers, cust + 1, cust - 1), cust)  # CUST_MORTALITY
    odate = rng.integers(STARTDATE, ODATE_MAX + 1, n)
    lines = rng.integers(1, 8, n)  # O_LCNT 1..7
    m = int(lines.sum())
    order_of = np.repeat(np.arange(n), lines)
    linenumber = np.arange(m) - np.repeat(np.cumsum(lines) - lines, lines) + 1
    partkey = rng.integers(1, dom.parts + 1, m)
    suppkey = supplier_of(partkey, rng.integers(0, 4, m), dom.suppliers)
    quantity = rng.integers(1, 51, m)
    discount = rng.integers(0, 11, m)  # cents of a unit: 0.00 .. 0.10
    tax = rng.integers(0, 9, m)  # 0.00 .. 0.08
    eprice = retail_price_cents(partkey) * quantity
    ship = odate[order_of] + rng.integers(1, 122, m)
    commit = odate[order_of] + rng.integers(30, 91, m)
    receipt = ship + rng.integers(1, 31, m)
    rflag = np.where(receipt <= CURRENTDATE, np.asarray(["R", "A"], dtype=object)[rng.integers(0, 2, m)], "N")
    lstatus = np.where(ship > CURRENTDATE, "O", "F")
    # o_totalprice in cents, as build.c sums it: ((eprice * (100 - disc)) / 100) * (100 + tax) / 100
    line_total = ((eprice * (100 - discount)) // 100) * (100 + tax) // 100
    total = np.bincount(order_of, weights=line_total, minlength=n).astype(np.int64)
    open_lines = np.bincount(order_of, weights=(lstatus == "O"), minlength=n).astype(np.int64)
    ostatus = np.where(open_lines == lines, "O", np.where(open_lines == 0, "F", "P"))
    clerk = np.char.add("Clerk#", np.char.zfill(rng.integers(1, dom.clerks + 1, n).astype(str), 9))
    orders = pa.table(
        [
            pa.array(keys, pa.int64()),
            pa.array(cust, pa.int64()),
            pa.array(ostatus.astype(object), pa.string()),
            _decimal(total),
            pa.array(odate.astype(np.int32), pa.date32()),
            _pick(rng, PRIORITIES, n),
            pa.array(clerk.astype(object), pa.string()),
            pa.array(np.zeros(n, dtype=np.int32), pa.int32()),
            _pick(rng, order_comments, n),
        ],
        schema=ORDERS_SCHEMA,
    )
    lineitem = pa.table(
        [
            pa.array(keys[order_of], pa.int64()),
            pa.array(partkey, pa.int64()),
            pa.array(suppkey, pa.int64()),
            pa.array(linenumber.astype(np.int32), pa.int32()),
            _decimal(quantity * 100),
            _decimal(eprice),
            _decimal(discount),
            _decimal(tax),
            pa.array(rflag.astype(object), pa.string()),
            pa.array(lstatus.astype(object), pa.string()),
            pa.array(ship.astype(np.int32), pa.date32()),
            pa.array(commit.astype(np.int32), pa.date32()),
            pa.array(receipt.astype(np.int32), pa.date32()),
            _pick(rng, INSTRUCTIONS, m),
            _pick(rng, MODES, m),
            _pick(rng, line_comments, m),
        ],
        schema=LINEITEM_SCHEMA,
    )
    return orders, lineitem


# ---------------------------------------------------------------- the streams, committed with delta-rs


def _stamp(path: Path, ts: int) -> None:
    from mvsink.core.deltalog import set_commit_time

    set_commit_time(str(path), ts)


def _comments(raw: Path, table: str, column: str) -> np.ndarray:
    """The free-text comments of the first row group of a tpchgen-cli table (a sample of its text)."""
    import pyarrow.parquet as pq

    col = pq.ParquetFile(raw / f"{table}.parquet").read_row_group(0, columns=[column]).column(0)
    return np.asarray(col.cast(pa.string()).to_pylist(), dtype=object)


class Stream:
    """A change stream: ``apply`` commits one round's change of about ``rate`` of the orders to the
    sources under ``root/src`` (with delta-rs, each commit dated ``ts`` + a few ms) and says what it
    changed (counts of orders updated / deleted / inserted and of lineitems, and the key range)."""

    name = ""

    def __init__(self, root: Path, sf: float) -> None:
        self.root, self.sf = root, sf
        self.population = orders_count(sf)

    def orders_for(self, rate: float) -> int:
        return int(round(rate * self.population))

    def label(self, rate: float) -> str:
        return f"{rate:.1%}"

    def apply(self, rate: float, step: int, ts: int) -> dict[str, Any]:
        raise NotImplementedError


class RFStream(Stream):
    """RF1 + RF2 pairs (module docstring). ``rate`` is the fraction of the orders each function touches:
    0.001 is one pair (SF * 1,500 orders inserted and as many deleted), 0.01 ten pairs (a rate between
    whole pairs takes that many rows of the update sets: the band just ends inside a pair). The pairs of a
    round are committed together: one append per table (RF1: new files, narrow key range), then one
    delete per table (RF2: only the files holding the band's keys are rewritten)."""

    name = "rf"

    def __init__(self, root: Path, sf: float, *, seed: int = 20_270_101) -> None:
        super().__init__(root, sf)
        self.rowcnt = pair_orders(sf)
        self.dom = Domains.at(sf)
        self.cursor = 0  # update-set rows used so far
        self.seed = seed
        self._pools: tuple[np.ndarray, np.ndarray] | None = None

    def label(self, rate: float) -> str:
        pairs = self.orders_for(rate) / self.rowcnt
        return f"{pairs:g} pair{'' if pairs == 1 else 's'} ({rate:.1%})"

    def apply(self, rate: float, step: int, ts: int) -> dict[str, Any]:
        from deltalake import DeltaTable, write_deltalake

        count = self.orders_for(rate)
        if count <= 0:
            return {"orders_updated": 0, "orders_deleted": 0, "orders_inserted": 0}
        band = rf_band(self.cursor + 1, count, rowcnt=self.rowcnt, population=self.population)
        self.cursor = band.last
        if self._pools is None:
            raw = self.root / "raw"
            self._pools = (_comments(raw, "orders", "o_comment"), _comments(raw, "lineitem", "l_comment"))
        rng = np.random.default_rng([self.seed, band.first])
        orders, lineitem = new_orders(
            band.insert_keys, self.dom, rng, order_comments=self._pools[0], line_comments=self._pools[1]
        )
        src = self.root / "src"
        # RF1: the new orders, then their lineitems
        write_deltalake(str(src / "orders"), orders, mode="append")
        _stamp(src / "orders", ts)
        write_deltalake(str(src / "lineitem"), lineitem, mode="append")
        _stamp(src / "lineitem", ts)
        # RF2: the old orders, then their lineitems (the spec's order)
        DeltaTable(str(src / "orders")).delete(key_predicate("o_orderkey", band.delete_keys))
        _stamp(src / "orders", ts + 1)
        deleted_lines = DeltaTable(str(src / "lineitem")).delete(key_predicate("l_orderkey", band.delete_keys))
        _stamp(src / "lineitem", ts + 1)
        return {
            "pairs": band.pairs,
            "orders_updated": 0,
            "orders_deleted": count,
            "orders_inserted": count,
            "lineitems_inserted": lineitem.num_rows,
            "lineitems_deleted": int(deleted_lines.get("num_deleted_rows", -1)),
            "insert_keys": [int(band.insert_keys.min()), int(band.insert_keys.max())],
            "delete_keys": [int(band.delete_keys.min()), int(band.delete_keys.max())],
        }


class RF3Stream(Stream):
    """UPDATEs of the prices of the lineitems of the ``rate`` * orders most recent orders (highest keys)."""

    name = "rf3"

    def label(self, rate: float) -> str:
        return f"{rate:.1%} of orders"

    def apply(self, rate: float, step: int, ts: int) -> dict[str, Any]:
        from deltalake import DeltaTable

        count = self.orders_for(rate)
        if count <= 0:
            return {"orders_updated": 0, "orders_deleted": 0, "orders_inserted": 0}
        lo, hi = recent_band(self.population, count)
        res = DeltaTable(str(self.root / "src" / "lineitem")).update(
            updates={
                "l_extendedprice": "CAST(l_extendedprice * 1.01 AS DECIMAL(15,2))",
                "l_discount": "CASE WHEN l_discount >= 0.10 THEN CAST(0 AS DECIMAL(15,2)) "
                "ELSE CAST(l_discount + 0.01 AS DECIMAL(15,2)) END",
            },
            predicate=f"l_orderkey >= {lo} AND l_orderkey <= {hi}",
        )
        _stamp(self.root / "src" / "lineitem", ts)
        return {
            "orders_updated": count,
            "orders_deleted": 0,
            "orders_inserted": 0,
            "lineitems_updated": int(res.get("num_updated_rows", -1)),
            "update_keys": [lo, hi],
        }


class ScatteredStream(Stream):
    """The ``o_orderkey % m`` change (module docstring): about ``rate`` of the orders in 3 commits."""

    name = "scattered"

    def apply(self, rate: float, step: int, ts: int) -> dict[str, Any]:
        if rate <= 0:
            return {"orders_updated": 0, "orders_deleted": 0, "orders_inserted": 0}
        counts = scattered_counts(self.root, rate, step)
        scattered_change(self.root, rate, step, ts)
        return counts


def scattered_counts(root: Path, rate: float, step: int) -> dict[str, Any]:
    """The orders :func:`scattered_change` is about to update, delete and insert (same arithmetic)."""
    from deltalake import DeltaTable

    m = max(3, round(3 / rate))
    r = (7 * step) % m
    orders = DeltaTable(str(root / "src" / "orders")).to_pyarrow_table(columns=["o_orderkey"])
    rem = np.asarray(orders.column("o_orderkey").to_numpy()) % m
    return {
        "orders_updated": int((rem == r).sum()),
        "orders_deleted": int((rem == (r + 1) % m).sum()),
        "orders_inserted": int((rem == (r + 2) % m).sum()),
    }


def scattered_change(root: Path, rate: float, step: int, ts: int) -> None:
    """Update, delete and insert about ``rate`` of the orders (and their lineitems) in 3 commits."""
    import pyarrow.compute as pc
    from deltalake import DeltaTable, write_deltalake

    if rate <= 0:
        return
    orders, lineitem = DeltaTable(str(root / "src" / "orders")), DeltaTable(str(root / "src" / "lineitem"))
    m = max(3, round(3 / rate))
    r = (7 * step) % m
    orders.update(
        updates={"o_totalprice": "o_totalprice + 1", "o_orderstatus": "'X'"}, predicate=f"o_orderkey % {m} = {r}"
    )
    _stamp(root / "src" / "orders", ts)
    orders = DeltaTable(str(root / "src" / "orders"))
    orders.delete(f"o_orderkey % {m} = {(r + 1) % m}")
    _stamp(root / "src" / "orders", ts + 1)
    lineitem.delete(f"l_orderkey % {m} = {(r + 1) % m}")
    _stamp(root / "src" / "lineitem", ts + 1)
    offset = 10_000_000_000 * (step + 1)
    for t, key in (("orders", "o_orderkey"), ("lineitem", "l_orderkey")):
        current = pa.table(DeltaTable(str(root / "src" / t)).to_pyarrow_table())
        keys = np.asarray(current.column(key).to_numpy(zero_copy_only=False))
        add = current.filter(pa.array(keys % m == (r + 2) % m))
        add = add.set_column(add.schema.get_field_index(key), key, pc.add(add.column(key), offset))
        write_deltalake(str(root / "src" / t), add, mode="append")
        _stamp(root / "src" / t, ts + 2)


class DimsStream(Stream):
    """Price updates of parts, their partsupp rows and suppliers (module docstring): ``rate`` of the parts and of
    the suppliers, a band of keys that moves on each round (``step``)."""

    name = "dims"

    def label(self, rate: float) -> str:
        return f"{rate:.1%} of parts, their partsupp rows and suppliers"

    def bands(self, rate: float, step: int) -> tuple[tuple[int, int], tuple[int, int]]:
        """The round's [first, last] part keys and supplier keys."""
        out = []
        for per_sf in (PARTS_PER_SF, SUPPLIERS_PER_SF):
            total = max(1, int(round(per_sf * self.sf)))
            count = max(1, int(round(rate * total)))
            first = (step - 1) * count % total + 1
            out.append((first, min(total, first + count - 1)))
        return out[0], out[1]

    def apply(self, rate: float, step: int, ts: int) -> dict[str, Any]:
        from deltalake import DeltaTable

        (p_lo, p_hi), (s_lo, s_hi) = self.bands(rate, step)
        src = self.root / "src"
        parts = DeltaTable(str(src / "part")).update(
            updates={"p_retailprice": "CAST(p_retailprice * 1.01 AS DECIMAL(15,2))"},
            predicate=f"p_partkey >= {p_lo} AND p_partkey <= {p_hi}",
        )
        _stamp(src / "part", ts)
        partsupp = DeltaTable(str(src / "partsupp")).update(
            updates={
                "ps_supplycost": "CAST(ps_supplycost * 1.01 AS DECIMAL(15,2))",
                "ps_availqty": "CASE WHEN ps_availqty > 1 THEN ps_availqty - 1 ELSE ps_availqty END",
            },
            predicate=f"ps_partkey >= {p_lo} AND ps_partkey <= {p_hi}",
        )
        _stamp(src / "partsupp", ts + 1)
        suppliers = DeltaTable(str(src / "supplier")).update(
            updates={"s_acctbal": "CAST(s_acctbal + 1 AS DECIMAL(15,2))"},
            predicate=f"s_suppkey >= {s_lo} AND s_suppkey <= {s_hi}",
        )
        _stamp(src / "supplier", ts + 2)
        return {
            "orders_updated": 0,
            "orders_deleted": 0,
            "orders_inserted": 0,
            "parts_updated": int(parts.get("num_updated_rows", -1)),
            "partsupp_updated": int(partsupp.get("num_updated_rows", -1)),
            "suppliers_updated": int(suppliers.get("num_updated_rows", -1)),
            "part_keys": [p_lo, p_hi],
            "supplier_keys": [s_lo, s_hi],
        }


def make_stream(name: str, root: Path, sf: float) -> Stream:
    kinds: dict[str, type[Stream]] = {
        "rf": RFStream,
        "rf3": RF3Stream,
        "scattered": ScatteredStream,
        "dims": DimsStream,
    }
    if name not in kinds:
        raise ValueError(f"unknown change stream {name!r}: one of {', '.join(STREAMS + DIMENSION_STREAMS)}")
    return kinds[name](root, sf)
