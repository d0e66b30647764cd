"""Key sets of the change terms' pruned reads (:mod:`mvsink.incremental.pruning`): a column's keys as ranges, and
their read in the driver from plain Parquet files with pyarrow (a change set's change files; a pruned read's kept
files), which stops once its keys reach every file of the sources they filter (:class:`Cover`)."""

from __future__ import annotations

import bisect
import dataclasses
import datetime as dt
import decimal
import functools
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, Final

from mvsink.core.arrowvalues import array_of, scalar_of
from mvsink.core.deltalog import ChangeFile

if TYPE_CHECKING:
    from pyspark.sql import Column

MAX_KEYS = 200_000  # more distinct keys than this: the edge is not used (the source is read whole)
MAX_INLINE = 1_000  # up to this many keys, the filter also lists them (rows outside them are dropped at once)
MAX_RANGES = 32  # the keys as at most this many [lo, hi] ranges (what Delta's file skipping sees)
MAX_DRIVER_KEY_BYTES = 64 << 20  # change files up to this size have their keys read in the driver (no Spark job)
# larger files too, up to this size, where the columns a key read decodes (their compressed column chunks, by the files'
# footers) are within MAX_DRIVER_KEY_BYTES: a chained key read of TPC-H's lineitem at SF 1 (231 MB of files, 2 integer
# columns read) took a Spark job of 1-2 s through Spark Connect, and ~0.2 s here
MAX_DRIVER_KEY_FILE_BYTES = 4 << 30


@dataclasses.dataclass(frozen=True)
class KeyRanges:
    """A column's keys as ranges (sorted, disjoint) and, when few, the exact values."""

    ranges: tuple[tuple[Any, Any], ...]
    values: tuple[Any, ...] | None

    @property
    def empty(self) -> bool:
        return not self.ranges

    def predicate(self, column: str) -> Column:
        from pyspark.sql import functions as F

        if self.empty:
            return F.lit(False)
        sql = self.sql(column)
        if sql is not None:
            return F.expr(sql)
        c = F.col(f"`{column}`")
        cond = None
        for lo, hi in self.ranges:
            term = c == F.lit(lo) if lo == hi else (c >= F.lit(lo)) & (c <= F.lit(hi))
            cond = term if cond is None else cond | term
        assert cond is not None
        if self.values is not None and len(self.values) > len(self.ranges):
            cond = cond & c.isin(list(self.values))
        return cond

    def sql(self, column: str) -> str | None:
        """:meth:`predicate` as one SQL expression, for integer keys (a Column built over py4j costs a call per
        literal: ~0.1 s for a thousand keys); None for other types."""
        keys = [v for r in self.ranges for v in r] + list(self.values or ())
        if not all(type(v) is int for v in keys):
            return None
        c = "`" + column.replace("`", "``") + "`"
        cond = " OR ".join(f"{c} = {lo}" if lo == hi else f"({c} >= {lo} AND {c} <= {hi})" for lo, hi in self.ranges)
        if self.values is not None and len(self.values) > len(self.ranges):
            cond = f"({cond}) AND {c} IN ({', '.join(str(v) for v in self.values)})"
        return f"({cond})"

    def may_hold(self, lo: Any, hi: Any) -> bool:
        """A file whose column lies in [lo, hi] may hold one of the keys (True where that cannot be told)."""
        if lo is None or hi is None:
            return True
        try:
            return any(not (b < lo or a > hi) for a, b in self.ranges)
        except TypeError:  # statistics of another type than the keys (e.g. a partition value's string)
            return True


def _gap(a: Any, b: Any) -> float | None:
    """How far apart two sorted keys are (None: the type has no distance; every gap counts the same)."""
    if isinstance(a, bool):
        return None
    if isinstance(a, int | float | decimal.Decimal):
        return float(b) - float(a)
    if isinstance(a, dt.datetime):
        return float((b - a).total_seconds())
    if isinstance(a, dt.date):
        return float((b - a).days)
    return None


def key_ranges(values: list[Any], *, max_ranges: int = MAX_RANGES) -> KeyRanges:
    """The non-null ``values`` as at most ``max_ranges`` ranges: the largest gaps between sorted keys split them."""
    keys = sorted({v for v in values if v is not None})
    if not keys:
        return KeyRanges((), ())
    exact = tuple(keys) if len(keys) <= MAX_INLINE else None
    splits = _int_splits(keys, max_ranges)
    if splits is None:
        gaps = [(_gap(keys[i], keys[i + 1]), i) for i in range(len(keys) - 1)]
        if any(g is None for g, _ in gaps):
            return KeyRanges(((keys[0], keys[-1]),), exact)
        splits = sorted(i for _, i in sorted(gaps, key=lambda x: -(x[0] or 0.0))[: max_ranges - 1])
    ranges = []
    start = 0
    for i in splits:
        ranges.append((keys[start], keys[i]))
        start = i + 1
    ranges.append((keys[start], keys[-1]))
    return KeyRanges(tuple(ranges), exact)


def _int_splits(keys: list[Any], max_ranges: int) -> list[int] | None:
    """For sorted integer ``keys`` (else None), the positions after which the ``max_ranges - 1`` largest gaps
    fall, in order (numpy: a change set's keys run to hundreds of thousands at SF 10)."""
    import numpy as np

    if not all(type(k) is int for k in keys):
        return None
    try:
        arr = np.fromiter(keys, dtype=np.int64, count=len(keys))
    except OverflowError:
        return None
    gaps = np.diff(arr.astype(np.float64))
    k = max_ranges - 1
    if k <= 0 or not len(gaps):
        return []
    if len(gaps) <= k:
        return list(range(len(gaps)))
    top = np.argsort(-gaps, kind="stable")[:k]  # ties: the first gap, as the general path
    return sorted(int(i) for i in top)


@dataclasses.dataclass(frozen=True)
class ChangeFiles:
    """A change set's plain Parquet files (inserted, deleted and change data feed files alike: every row of them
    is a changed row) and the table's partition columns (their values are in the log, not in the files)."""

    files: tuple[ChangeFile, ...]
    partition_columns: tuple[str, ...]

    @property
    def bytes(self) -> int:
        return sum(f.size for f in self.files)


def keys_in_driver(
    change: ChangeFiles, columns: list[str], *, where: tuple[tuple[str, KeyRanges], ...] = ()
) -> dict[str, list[Any]] | None:
    """Each column's distinct values in the files' rows (those whose ``where`` columns are within their keys),
    read with pyarrow in the driver (only those columns), or None where that is not sure (a partition
    column, a file without the column, a type pyarrow and Spark may read differently, too many bytes or
    keys): the caller then collects them with Spark."""
    got = scan_keys(change, columns, where, None)
    assert not isinstance(got, Cover)
    return got


#: Rows read at a time by a key read that may stop early (:class:`Cover`)
COVER_BATCH_ROWS: Final = 65_536


@dataclasses.dataclass
class Cover:
    """The files a key read's filters would keep whatever its keys: for each key column, the [min, max] statistics
    of the target files (of the columns it filters) that no key read so far lies in. A file is kept by a filter
    as soon as one key lies in its [min, max] (:meth:`KeyRanges.may_hold` of any ranges holding that key, and of
    no statistics at all), so once every file is reached the rest of the keys cannot skip one."""

    spans: dict[str, list[tuple[Any, Any]]]

    def add(self, column: str, values: Iterable[Any]) -> None:
        """Keys ``values`` of ``column`` read: the files they lie in are reached."""
        left = self.spans.get(column)
        if not left:
            return
        try:
            keys = sorted(v for v in values if v is not None)
        except TypeError:  # keys that do not order (no key type does): nothing is reached
            return
        self.spans[column] = [(lo, hi) for lo, hi in left if not _holds_key(keys, lo, hi)]

    @property
    def done(self) -> bool:
        return not any(self.spans.values())


def _holds_key(keys: list[Any], lo: Any, hi: Any) -> bool:
    """Does [lo, hi] hold one of the sorted ``keys`` (True where that cannot be told, as :meth:`KeyRanges.may_hold`)."""
    if lo is None or hi is None:
        return True
    try:
        i = bisect.bisect_left(keys, lo)
        return i < len(keys) and not keys[i] > hi
    except TypeError:
        return True


def scan_keys(
    change: ChangeFiles, columns: list[str], where: tuple[tuple[str, KeyRanges], ...], cover: Cover | None
) -> dict[str, list[Any]] | Cover | None:
    """:func:`keys_in_driver`; with ``cover``, the files are read :data:`COVER_BATCH_ROWS` rows at a time and the read
    stops, giving ``cover``, once the keys read reach every file it names (the rest of the keys are then not needed:
    its filters keep every file whatever they are)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from mvsink.engines.arrow import parquet_column_batches, parquet_columns

    wanted = sorted(set(columns) | {c for c, _ in where})
    if set(wanted) & set(change.partition_columns) or not _fits_driver(change, wanted):
        return None
    found: dict[str, set[Any]] = {c: set() for c in columns}
    for f in change.files:
        if cover is None:
            table = parquet_columns(f.path, wanted)
            parts = None if table is None else iter([table])
        else:
            parts = parquet_column_batches(f.path, wanted, COVER_BATCH_ROWS)
        if parts is None:
            return None
        for table in parts:
            for c in wanted:  # types whose values pyarrow and Spark give alike (a Python int, str, date or Decimal)
                t = table.schema.field(c).type
                if not (
                    pa.types.is_integer(t) or pa.types.is_string(t) or pa.types.is_date32(t) or pa.types.is_decimal(t)
                ):
                    return None
            if where:
                try:
                    mask = functools.reduce(pc.and_, [_within(table.column(c), keys) for c, keys in where])
                except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError, TypeError, ValueError):
                    return None
                table = table.filter(mask)
            for c in columns:
                values = table.column(c).unique().to_pylist()
                found[c].update(values)
                if cover is not None:
                    cover.add(c, values)
            if cover is not None and cover.done:
                return cover
    out = {c: [v for v in vals if v is not None] for c, vals in found.items()}
    if any(len(v) > MAX_KEYS for v in out.values()):
        return None
    return out


def _fits_driver(change: ChangeFiles, columns: list[str]) -> bool:
    """May the driver read ``columns`` of the files: at most :data:`MAX_DRIVER_KEY_BYTES` of files, or at most
    :data:`MAX_DRIVER_KEY_FILE_BYTES` of files whose column chunks of ``columns`` take at most
    :data:`MAX_DRIVER_KEY_BYTES` (compressed, by their footers; a footer that cannot be read: no)."""
    from mvsink.engines.arrow import parquet_column_bytes

    if change.bytes <= MAX_DRIVER_KEY_BYTES:
        return True
    if change.bytes > MAX_DRIVER_KEY_FILE_BYTES:
        return False
    total = 0
    for f in change.files:
        try:
            got = parquet_column_bytes(f.path, columns)
        except Exception:  # noqa: BLE001 (an unreadable footer: Spark's read decides)
            return False
        if got is None:
            return False
        total += got
        if total > MAX_DRIVER_KEY_BYTES:
            return False
    return True


def _within(column: Any, keys: KeyRanges) -> Any:
    """pyarrow's mask of ``column``'s values within ``keys`` (NULL: not within)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if keys.empty:
        return array_of([False] * len(column), pa.bool_())
    if keys.values is not None:
        return pc.is_in(column, value_set=array_of(list(keys.values), column.type))
    masks = [
        pc.and_(
            pc.greater_equal(column, scalar_of(lo, column.type)),
            pc.less_equal(column, scalar_of(hi, column.type)),
        )
        for lo, hi in keys.ranges
    ]
    return pc.fill_null(functools.reduce(pc.or_, masks), scalar_of(False, pa.bool_()))
