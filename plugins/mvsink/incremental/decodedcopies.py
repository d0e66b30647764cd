"""Decoded copies of unchanged sources beside a view's table (the one owner of ``<target>/_mv_decoded/``).

DuckDB's change terms that join a large unchanged source (a dimension, as TPC-H's ``customer`` under Q10) read only
its rows whose join key is among the change's keys (:mod:`mvsink.incremental.sharedreads`). Those keys fall in every
Parquet page, so each refresh decompresses and decodes the whole of the columns the query names again (Q10 at SF 10:
customer's 7 columns, 1.5 M rows, about 270 MB decoded; 0.2-0.3 s of a refresh of under a second).

So the first such read of a source's files also writes what it decoded, uncompressed, as Arrow IPC files under
the view table's ``_mv_decoded/``; a later refresh over the same files memory-maps it and picks the rows whose key
is among its keys (:func:`pyarrow.compute.is_in`), touching only the pages that hold them. The rows are the same
either way: the file holds every row of the files, as the same DuckDB read typed them.

- A copy holds one Parquet file's rows and is named by a hash of that file (path, size, modification time), the
  columns read and their types, and DuckDB's version: a source version reads the copies of the files it kept and
  makes copies of the files it added (or rewrote), and a pruned read, whose files vary with the keys, reads the
  copies of the files it keeps. A copy that does not read back is deleted and its file read again.
- The copies of one view take at most ``MVSINK_DECODED_COPIES_MB`` (a larger copy is not written); the least
  recently used ones beyond it are deleted whenever one is written. ``0`` turns the copies off.
- Local view tables and local source files only; a dry run writes none.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import os
import time
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    import pyarrow as pa

    from mvsink.location import Location

log = logging.getLogger(__name__)

FOLDER: Final = "_mv_decoded"
_SUFFIX: Final = ".arrow"
_FORMAT: Final = 1  # bump when what a copy holds changes
_STALE_TMP_SECONDS: Final = 3600.0  # a half-written copy older than this is a crashed writer's


@dataclasses.dataclass(frozen=True)
class Copies:
    """Where a view's decoded copies live (``folder``), their byte budget, and whether this refresh may write."""

    folder: Path
    max_bytes: int
    writable: bool


def for_target(target: Location, *, dry_run: bool) -> Copies | None:
    """The decoded copies of the view whose table is ``target``, or None (off, or not a local table)."""
    from mvsink import settings
    from mvsink.location import joinpath

    limit = settings.decoded_copies_mb()
    if limit <= 0 or not target.is_local:
        return None
    return Copies(Path(joinpath(target, FOLDER).key), limit * 1024 * 1024, not dry_run)


def copy_name(file: Location, schema: pa.Schema) -> str | None:
    """The name of the copy of Parquet file ``file`` read as ``schema`` (None if it is not local or is gone)."""
    import duckdb

    if not file.is_local:
        return None
    try:
        st = os.stat(file.key)
    except OSError:
        return None
    h = hashlib.sha256(f"{_FORMAT}\0{duckdb.__version__}\0{file.key}\0{st.st_size}\0{st.st_mtime_ns}\0".encode())
    for field in schema:
        h.update(f"{field.name}\0{field.type}\0{field.nullable}\0".encode())
    return h.hexdigest()[:40]


def rows_with_keys(
    copies: Copies,
    *,
    files: Sequence[Location],
    schema: pa.Schema,
    column: str,
    keys: pa.Array,
    scan: Callable[[Location], pa.RecordBatchReader | None],
) -> pa.Table | None:
    """The rows whose ``column`` is among ``keys`` (NULL matches nothing) of Parquet ``files`` read as ``schema``:
    per file from its copy if that reads back, else from ``scan(file)`` (the read the copy holds), writing the copy
    on the way where allowed and within the budget. A copy is per file, so the files a pruned read keeps, which
    vary with the keys, share them. None where no copy serves (a file not local, a scan that cannot be made, keys
    that do not cast exactly to the column's type)."""
    import pyarrow as pa

    parts: list[pa.Table] = []
    for file in files:
        name = copy_name(file, schema)
        if name is None:
            return None
        path = copies.folder / f"{name}{_SUFFIX}"
        got: pa.Table | None = None
        read = False
        if path.exists():
            try:
                got, read = _picked_from(path, column, keys), True
            except (OSError, ValueError, TypeError) as exc:  # pyarrow's errors are these
                log.info("decoded copy %s does not read back (%s): reading %s", path.name, exc, file.key)
                _unlink(path)
            else:
                _touch(path)
        if not read:
            reader = scan(file)
            if reader is None:
                return None
            got = _picked_writing(copies, path, column, keys, reader)
        if got is None:
            return None
        parts.append(got)
    if not parts:
        return None
    try:
        return pa.concat_tables(parts)
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        return None


def _picked_from(path: Path, column: str, keys: pa.Array) -> pa.Table | None:
    import pyarrow as pa
    import pyarrow.ipc as ipc

    reader = ipc.open_file(pa.memory_map(str(path)))
    batches = [reader.get_batch(i) for i in range(reader.num_record_batches)]
    return _picked(reader.schema, batches, column, keys)


def _picked(schema: pa.Schema, batches: Sequence[pa.RecordBatch], column: str, keys: pa.Array) -> pa.Table | None:
    import pyarrow as pa
    import pyarrow.compute as pc

    i = schema.get_field_index(column)
    if i < 0:
        raise ValueError(f"no column {column!r}")
    try:
        wanted = keys.cast(schema.field(i).type, safe=True)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return None
    out = [b.filter(pc.is_in(b.column(i), value_set=wanted, skip_nulls=True)) for b in batches]
    return pa.Table.from_batches(out, schema=schema)


def _picked_writing(
    copies: Copies, path: Path, column: str, keys: pa.Array, reader: pa.RecordBatchReader
) -> pa.Table | None:
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.ipc as ipc

    schema = reader.schema
    i = schema.get_field_index(column)
    if i < 0:
        return None
    try:
        wanted = keys.cast(schema.field(i).type, safe=True)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return None
    tmp: Path | None = None
    writer = None
    if copies.writable:
        try:
            copies.folder.mkdir(parents=True, exist_ok=True)
            _sweep(copies.folder)
            tmp = copies.folder / f".{path.stem}.{uuid.uuid4().hex}.tmp"
            writer = ipc.new_file(str(tmp), schema)
        except OSError as exc:
            log.info("no decoded copy written (%s)", exc)
            tmp, writer = None, None
    written = 0
    picked: list[pa.RecordBatch] = []
    try:
        for batch in reader:
            picked.append(batch.filter(pc.is_in(batch.column(i), value_set=wanted, skip_nulls=True)))
            if writer is None:
                continue
            if written + batch.nbytes > copies.max_bytes:
                log.info("no decoded copy written: over MVSINK_DECODED_COPIES_MB (%d MB)", copies.max_bytes >> 20)
                writer.close()
                writer = None
                continue
            writer.write_batch(batch)
            written += batch.nbytes
        if writer is not None and tmp is not None:
            writer.close()
            writer = None
            os.replace(tmp, path)
            tmp = None
            log.info("decoded copy %s written: %.1f MB", path.name, written / 1e6)
            _evict(copies, keep=path)
    except OSError as exc:
        log.info("no decoded copy written (%s)", exc)
    finally:
        if writer is not None:
            writer.close()
        if tmp is not None:
            _unlink(tmp)
    return pa.Table.from_batches(picked, schema=schema)


def _evict(copies: Copies, *, keep: Path) -> None:
    """Delete the least recently used copies beyond the budget (never ``keep``)."""
    found = []
    for p in copies.folder.glob(f"*{_SUFFIX}"):
        try:
            st = p.stat()
        except OSError:
            continue
        found.append((p == keep, st.st_mtime, st.st_size, p))
    total = 0
    for is_kept, _, size, p in sorted(found, reverse=True):  # the kept one first, then the newest
        if total + size > copies.max_bytes and not is_kept:
            _unlink(p)
        else:
            total += size


def _sweep(folder: Path) -> None:
    """Delete half-written copies a crashed writer left."""
    now = time.time()
    for p in folder.glob(".*.tmp"):
        try:
            if now - p.stat().st_mtime > _STALE_TMP_SECONDS:
                p.unlink()
        except OSError:
            pass


def _touch(path: Path) -> None:
    try:
        os.utime(path)
    except OSError:
        pass


def _unlink(path: Path) -> None:
    try:
        path.unlink()
    except OSError:
        pass
