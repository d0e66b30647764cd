"""The independent oracle: a query evaluated by DuckDB on delta-rs snapshots, compared as multisets of rows."""

from __future__ import annotations

import decimal
from collections import Counter
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa

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
