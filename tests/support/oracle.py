"""The independent oracle: a query evaluated by DuckDB on delta-rs snapshots, compared as multisets of rows."""

from __future__ import annotations

import decimal
from collections import Counter
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
from deltalake import DeltaTable

from mvsink.columns import DIFF, TIME
from tests.support.delta import snapshot

Rows = Counter[tuple[Any, ...]]


def oracle(query: str, sources: dict[str, str | Path], ts: int) -> Rows:
    """The query evaluated by DuckDB on the sources as of ``ts``: a multiset of rows."""
    con = duckdb.connect()
    for name, path in sources.items():
        con.register(name, snapshot(path, ts))
    return multiset(con.sql(query).to_arrow_table())


def norm(v: Any) -> Any:
    """A value in a form that compares equal across engines (numbers to 6 decimals, the rest as text)."""
    if v is None:
        return None
    if isinstance(v, bool):
        return v
    if isinstance(v, (int, float, decimal.Decimal)):
        return format(float(v), ".6f")
    return str(v)


def multiset(table: pa.Table) -> Rows:
    """The rows of ``table`` (without ``_mv_time``/``_mv_diff``) with their counts."""
    cols = [c for c in table.column_names if c not in ("_mv_time", "_mv_diff")]
    return Counter(tuple(norm(r[c]) for c in cols) for r in table.select(cols).to_pylist())


def signed(table: pa.Table) -> Counter[tuple[Any, ...]]:
    """Rows with signed multiplicities: row -> summed ``_mv_diff`` (zeros dropped)."""
    cols = [c for c in table.column_names if c not in ("_mv_time", "_mv_diff")]
    out: Counter[tuple[Any, ...]] = Counter()
    for row in table.to_pylist():
        out[tuple(norm(row[c]) for c in cols)] += row["_mv_diff"]
    return Counter({k: v for k, v in out.items() if v})


def minus(a: Counter[tuple[Any, ...]], b: Counter[tuple[Any, ...]]) -> Counter[tuple[Any, ...]]:
    """``a - b`` with negative counts kept (zeros dropped): the signed change from ``b`` to ``a``."""
    out: Counter[tuple[Any, ...]] = Counter(a)
    for k, v in b.items():
        out[k] -= v
    return Counter({k: v for k, v in out.items() if v})


def zero_signs(rows: Counter[tuple[Any, ...]]) -> Counter[tuple[Any, ...]]:
    """``rows`` (normalised) with -0.0 written as 0.0: SQL equality makes them one value, and DuckDB's projection keeps
    -0.0 where Spark's grouping may not."""
    out: Counter[tuple[Any, ...]] = Counter()
    for row, n in rows.items():
        out[tuple("0.000000" if v == "-0.000000" else v for v in row)] += n
    return out


def ok_rows_query(query: str, checks: list[dict[str, str]] | None) -> str:
    """A view's ok rows for the oracle: its query without the rows a check (``expr``) drops or marks as errors."""
    if not checks:
        return query
    keep = " AND ".join(f"coalesce(({c['expr']}), false)" for c in checks)
    return f"SELECT * FROM ({query}) q WHERE {keep}"


def table_rows(target: str) -> Counter[tuple[Any, ...]]:
    """A view table's rows (every column but the time and the diff, hidden state included, in name order) summed
    per row, exact values, zero sums dropped."""
    out: Counter[tuple[Any, ...]] = Counter()
    for r in DeltaTable(target).to_pyarrow_table().to_pylist():
        out[tuple(v for k, v in sorted(r.items()) if k not in (TIME, DIFF))] += r[DIFF]
    return Counter({k: v for k, v in out.items() if v})


def batch_rows(target: str, t: int) -> Counter[tuple[Any, ...]]:
    """The rows a view table's batch at time ``t`` wrote (as :func:`table_rows`, their diffs summed per row)."""
    out: Counter[tuple[Any, ...]] = Counter()
    for r in DeltaTable(target).to_pyarrow_table().to_pylist():
        if r[TIME] == t:
            out[tuple(v for k, v in sorted(r.items()) if k not in (TIME, DIFF))] += r[DIFF]
    return out
