"""The one reader of Delta commit files (``<table>/_delta_log/<version>.json``).

delta-rs answers most questions about a table (snapshots, frontiers, ``history()``); this
module answers the ones it does not: when each version was committed, which actions one
commit made, which of our batches the log records, and what changed between two versions
(a source's change set, for incremental refreshes). No other module opens ``_delta_log``.

Commit times are the commits' ``inCommitTimestamp`` when the table writes them (Delta's
in-commit timestamps), else the commit files' modification times: on local disk the file's
mtime (what :func:`set_commit_time` sets), on object storage the store's last-modified time.
Local paths are read with ``os``; any other location through :mod:`mvsink.core.storage`.

Per write step (:func:`snapshot_cache`): each table version opened once (what the step read of each source:
:mod:`mvsink.core.readlog`).
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import datetime
import json
import logging
import os
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, TypeVar
from urllib.parse import unquote

from mvsink.core import storage
from mvsink.core.commitinfo import META, CommitInfo
from mvsink.location import Location, Where, parse

if TYPE_CHECKING:
    import pyarrow as pa


CHANGE_TYPE: Final = "_change_type"  # the change data feed's column in its files
# A change data feed row's ``_change_type``: the row inserted, or deleted (the feed's readers all use these).
PLUS_CHANGE_TYPES: Final = ("insert", "update_postimage")
MINUS_CHANGE_TYPES: Final = ("delete", "update_preimage")

log = logging.getLogger(__name__)

_T = TypeVar("_T")
_SNAPSHOTS: contextvars.ContextVar[dict[tuple[Any, ...], Any] | None] = contextvars.ContextVar(
    "mvsink_snapshots", default=None
)


@contextlib.contextmanager
def snapshot_cache() -> Iterator[None]:
    """Within it (one refresh, or one write step), what is read of a table at a fixed version is read once.

    A Delta version never changes, so the handles and file lists of one refresh may be shared; outside
    one nothing is cached (a long-lived process always sees tables anew). Nested, it is the outer one's cache.
    """
    if _SNAPSHOTS.get() is not None:
        yield
        return
    token = _SNAPSHOTS.set({})
    try:
        yield
    finally:
        _SNAPSHOTS.reset(token)


def snapshots_cached() -> bool:
    """Is a :func:`snapshot_cache` active?"""
    return _SNAPSHOTS.get() is not None


def keep_snapshot(key: tuple[Any, ...], value: Any) -> None:
    """Inside :func:`snapshot_cache`, ``value`` is what :func:`cached_snapshot` gives for ``key`` from now on."""
    cache = _SNAPSHOTS.get()
    if cache is not None:
        cache[key] = value


def cached_snapshot(key: tuple[Any, ...], make: Callable[[], _T]) -> _T:
    """``make()``, or inside :func:`snapshot_cache` its first result for ``key`` (a path and a version)."""
    cache = _SNAPSHOTS.get()
    if cache is None:
        return make()
    if key not in cache:
        cache[key] = make()
    return cache[key]  # type: ignore[no-any-return]


LOG_DIR = "_delta_log"
_COMMIT_NAME_LEN = 25  # 20 digits + ".json"


def is_delta_table(path: Where) -> bool:
    """There is a Delta table at ``path`` (a ``_delta_log`` folder with at least one commit)."""
    log_dir = parse(path).joinpath(LOG_DIR)
    if not log_dir.is_local:
        return any(e.name.endswith(".json") for e in storage.list_dir(log_dir))
    local = Path(log_dir.key)
    return local.is_dir() and any(local.glob("*.json"))


def _is_commit_name(n: str) -> bool:
    return n.endswith(".json") and n[:-5].isdigit() and len(n) == _COMMIT_NAME_LEN


def _commit_name(version: int) -> str:
    return f"{version:020d}.json"


def _listed_commits(loc: Location) -> dict[int, int]:
    """Version -> the commit file's modification time in ns, from one listing of the log folder."""
    out: dict[int, int] = {}
    log_dir = loc.joinpath(LOG_DIR)
    if not log_dir.is_local:
        for e in storage.list_dir(log_dir):
            if not e.is_dir and _is_commit_name(e.name):
                out[int(e.name[:-5])] = e.mtime_ms * 1_000_000
        return out
    try:
        with os.scandir(log_dir.key) as it:
            for d in it:
                if _is_commit_name(d.name):
                    out[int(d.name[:-5])] = int(d.stat().st_mtime_ns)
    except FileNotFoundError:
        return {}
    return out


def _commit_text(loc: Location, version: int) -> str | None:
    file = loc.joinpath(LOG_DIR, _commit_name(version))
    if not file.is_local:
        return storage.read_text(file)
    try:
        return Path(file.key).read_text()
    except FileNotFoundError:
        return None


_ICT_CACHE: dict[tuple[str, int], int | None] = {}  # commit files never change: (table, version) -> ICT


def _in_commit_timestamp(loc: Location, version: int) -> int | None:
    """The commit's ``inCommitTimestamp`` (ms), None if it has none."""
    key = (loc.uri, version)
    if key not in _ICT_CACHE:
        text = _commit_text(loc, version)
        ict = None
        if text:
            first = text.split("\n", 1)[0]
            if "inCommitTimestamp" in first:
                try:
                    ict = json.loads(first).get("commitInfo", {}).get("inCommitTimestamp")
                except json.JSONDecodeError:
                    ict = None
        _ICT_CACHE[key] = int(ict) if ict is not None else None
    return _ICT_CACHE[key]


def _commit_file(loc: Location, version: int) -> Path:
    """The commit file of a table on local disk."""
    return Path(loc.key) / LOG_DIR / _commit_name(version)


# ---------------------------------------------------------------- versions and their commit times


def commit_times(path: Where) -> dict[int, int]:
    """Version -> commit time in ms of every retained commit: its in-commit timestamp if the table writes
    them (checked on the newest commit), else the commit file's modification (last-modified) time."""
    loc = parse(path)
    listed = _listed_commits(loc)
    out = {v: ns // 1_000_000 for v, ns in listed.items()}
    if out and _in_commit_timestamp(loc, max(out)) is not None:
        for v in out:
            ict = _in_commit_timestamp(loc, v)
            if ict is not None:
                out[v] = ict
    return out


def newest_commit(path: Where) -> tuple[int, int] | None:
    """(version, modification time in ns) of the newest commit file, from the log folder's listing; None: no
    table. Cheap: a table's frontiers and commit log change only with a new commit, so readers may keep what
    they read until this changes."""
    listed = _listed_commits(parse(path))
    if not listed:
        return None
    v = max(listed)
    return v, listed[v]


def set_commit_time(path: Where, t_ms: int, *, version: int | None = None) -> int:
    """Date a commit (default: the newest) at ``t_ms``: its file's mtime, which time travel reads.

    For demos, tests and benchmarks that build a source history at chosen times (local tables only: an
    object store sets its own last-modified times). Returns the version.
    """
    loc = parse(path)
    if not loc.is_local:
        raise ValueError(f"set_commit_time: {path} is on object storage, whose commit times cannot be set")
    v = max(commit_times(loc)) if version is None else version
    os.utime(_commit_file(loc, v), ns=(t_ms * 1_000_000, t_ms * 1_000_000))
    return v


# ---------------------------------------------------------------- one commit's actions


@dataclasses.dataclass(frozen=True)
class Commit:
    """One commit file: its version, commit time (ms) and actions, in file order."""

    version: int
    timestamp: int
    actions: tuple[dict[str, Any], ...]

    def _of(self, kind: str) -> list[dict[str, Any]]:
        return [a[kind] for a in self.actions if kind in a]

    @property
    def adds(self) -> list[dict[str, Any]]:
        return self._of("add")

    @property
    def removes(self) -> list[dict[str, Any]]:
        return self._of("remove")

    @property
    def cdc(self) -> list[dict[str, Any]]:
        """Change Data Feed files (rows with a ``_change_type`` column)."""
        return self._of("cdc")

    @property
    def metadata(self) -> dict[str, Any] | None:
        found = self._of("metaData")
        return found[0] if found else None

    @property
    def protocol(self) -> dict[str, Any] | None:
        found = self._of("protocol")
        return found[0] if found else None

    @property
    def commit_info(self) -> dict[str, Any]:
        """The raw ``commitInfo`` action (empty if the writer left none)."""
        found = self._of("commitInfo")
        return found[0] if found else {}

    @property
    def transactions(self) -> dict[str, int]:
        """Application transactions set by this commit: app id -> version."""
        return {t["appId"]: int(t["version"]) for t in self._of("txn")}

    @property
    def info(self) -> CommitInfo | None:
        """Our commit info, None for a foreign commit."""
        return CommitInfo.from_history(self.commit_info)


def read_commit(path: Where, version: int) -> Commit | None:
    """The commit ``version`` of the table at ``path``; None if its file is gone (log cleanup)."""
    loc = parse(path)
    file = loc.joinpath(LOG_DIR, _commit_name(version))
    if not file.is_local:
        text = storage.read_text(file)
        entry = storage.info(file) if text is not None else None
        if text is None or entry is None:
            return None
        ts = entry.mtime_ms
    else:
        f = Path(file.key)
        try:
            st = f.stat()
            text = f.read_text()
        except FileNotFoundError:
            return None
        ts = int(st.st_mtime_ns // 1_000_000)
    ict = _in_commit_timestamp(loc, version)
    return Commit(version, ict if ict is not None else ts, _parse(text))


def _parse(text: str) -> tuple[dict[str, Any], ...]:
    return tuple(json.loads(line) for line in text.splitlines() if line.strip())


# ---------------------------------------------------------------- our batches in the log


def batches_committed(path: Where, batch_ids: Iterable[str], *, committed_from_ms: float | None = None) -> set[str]:
    """The batch ids among ``batch_ids`` that an append commit in the log records.

    Reads only the commit files committed at or after ``committed_from_ms`` (all if None).
    """
    wanted = set(batch_ids)
    found: set[str] = set()
    if not wanted:
        return found
    loc = parse(path)
    for v, ts in commit_times(loc).items():
        if committed_from_ms is not None and ts < committed_from_ms:
            continue
        try:
            text = _commit_text(loc, v)
        except OSError:
            continue
        if text is None or META + "batch_id" not in text:  # cheap: most commits name no batch
            continue
        try:
            info = Commit(v, ts, _parse(text)).info
        except (json.JSONDecodeError, TypeError, ValueError):
            continue
        if info is not None and info.operation == "append" and info.batch_id in wanted:
            found.add(str(info.batch_id))
    return found


# ---------------------------------------------------------------- change sets between two versions


@dataclasses.dataclass(frozen=True)
class ChangeFile:
    path: Location  # the file, with the table's options (absolute_path)
    partition_values: tuple[tuple[str, str | None], ...]
    size: int
    version: int = -1  # the table version whose snapshot holds the file's rows (an add's; a remove's minus one)
    deletion_vector: bool = False  # the action carries a deletion vector: only Delta's reader reads it right


@dataclasses.dataclass
class ChangeSet:
    """Rows inserted and deleted between two versions of a table, as file lists.

    ``change_data_feed``: the table records Delta's change data feed over the whole range (it was on at
    ``from_version`` and no commit in the range changed the table's metadata), so Delta's
    ``readChangeFeed`` can read the changes.
    """

    inserted: list[ChangeFile] = dataclasses.field(default_factory=list)
    deleted: list[ChangeFile] = dataclasses.field(default_factory=list)
    cdc: list[ChangeFile] = dataclasses.field(default_factory=list)  # files with a _change_type column
    change_data_feed: bool = False

    @property
    def deletion_vectors(self) -> bool:
        """Does any changed file carry a deletion vector (its rows are the file's minus the deleted ones)?"""
        return any(f.deletion_vector for f in self.inserted + self.deleted)

    @property
    def files(self) -> tuple[ChangeFile, ...]:
        """Every changed file: inserted, deleted, then change data feed files."""
        return tuple(self.inserted + self.deleted + self.cdc)

    @property
    def bytes(self) -> int:
        return sum(f.size for f in self.files)


def change_set(path: Where, from_version: int, to_version: int) -> ChangeSet | str:
    """The changes of the Delta table at ``path`` in versions ``(from_version, to_version]``, or why not.

    A commit with Change Data Feed files contributes those; any other commit the files it added
    (inserted rows) and removed (deleted rows) with ``dataChange``. A file whose deletion vector changed
    is a removed file (its rows under the old vector) plus an added one (under the new vector): such files
    are marked, for Delta's reader to apply the vectors. A commit that changed the schema or protocol, or
    is no longer in the log makes the change set unknown, and so does a changed file that is gone
    (vacuumed). File sizes come from the actions; a remove that does not record its size takes it from the
    file's add action as delta-rs lists it.
    """
    out = ChangeSet(change_data_feed=_change_data_feed_on(path, from_version))
    sizes = _ActiveSizes(path)
    for v in range(from_version + 1, to_version + 1):
        commit = read_commit(path, v)
        if commit is None:
            return f"commit {v} is no longer in the log"
        if commit.metadata is not None or commit.protocol is not None:
            return f"commit {v} changed the table's schema or protocol"
        if commit.cdc:
            out.cdc.extend(_ref(path, a, sizes, v) for a in commit.cdc)
            continue
        for kind, action in ((k, a[k]) for a in commit.actions for k in ("add", "remove") if k in a):
            if not action.get("dataChange", True):
                continue
            # a removed file was active just before this commit; an added one from it on
            ref = _ref(path, action, sizes, v - 1 if kind == "remove" else v)
            (out.inserted if kind == "add" else out.deleted).append(ref)
    missing = [f.path for f in out.files if not _file_exists(f.path)]
    if missing:
        return f"{len(missing)} changed file(s) are gone (vacuumed?), e.g. {missing[0]}"
    return out


def _change_data_feed_on(path: Where, version: int) -> bool:
    """Was ``delta.enableChangeDataFeed`` on at ``version`` of the table (from delta-rs's metadata)?"""
    from deltalake import DeltaTable

    try:
        dt = cached_snapshot(
            ("delta", path, version),
            lambda: DeltaTable(path, version=version, storage_options=storage.delta_options(path)),
        )
        config = dt.metadata().configuration or {}
    except Exception:  # the version is gone or unreadable: the file-level change read decides
        return False
    return str(config.get("delta.enableChangeDataFeed", "false")).strip().lower() == "true"


def _file_exists(path: Location) -> bool:
    return os.path.exists(path.key) if path.is_local else storage.exists(path)


class _ActiveSizes:
    """Sizes of a table's active files at a version, from delta-rs's add actions (cached per version)."""

    def __init__(self, path: Where) -> None:
        self.path = path
        self._by_version: dict[int, dict[str, int]] = {}

    def size(self, raw_path: str, version: int) -> int:
        if version not in self._by_version:
            self._by_version[version] = _add_action_sizes(self.path, version)
        return self._by_version[version].get(raw_path, 0)


def pyarrow_table(data: Any) -> pa.Table:
    """delta-rs's arro3 table (its add actions) as a pyarrow table, through the Arrow C stream interface
    (``pa.table()`` would first import pandas to ask whether it is a DataFrame: 0.3 s of a refresh's process)."""
    import pyarrow as pa

    return pa.RecordBatchReader.from_stream(data).read_all()


def _add_action_sizes(path: Where, version: int) -> dict[str, int]:
    from deltalake import DeltaTable

    try:
        dt = cached_snapshot(
            ("delta", path, version),
            lambda: DeltaTable(path, version=version, storage_options=storage.delta_options(path)),
        )
        actions = pyarrow_table(dt.get_add_actions(flatten=True))
    except Exception:  # the version is gone or unreadable: the size stays unknown (0)
        return {}
    if not actions.num_rows:
        return {}
    return dict(zip(actions.column("path").to_pylist(), (int(s) for s in actions.column("size_bytes").to_pylist())))


def _ref(root: Where, action: dict[str, Any], sizes: _ActiveSizes, version: int) -> ChangeFile:
    raw = action["path"]
    p = absolute_path(root, raw)
    size = action.get("size")
    if size is None:
        size = sizes.size(raw, version)
    pv = tuple(sorted((action.get("partitionValues") or {}).items()))
    return ChangeFile(
        path=p, partition_values=pv, size=int(size), version=version, deletion_vector=bool(action.get("deletionVector"))
    )


@dataclasses.dataclass(frozen=True)
class FileStats:
    """One active file of a snapshot: its size and a column's min and max from the log's statistics
    (None where the log has none: a reader must read the file)."""

    path: str
    size: int
    min: Any
    max: Any


def file_statistics(path: Where, version: int, column: str) -> list[FileStats] | None:
    """Each active file at ``version`` with ``column``'s min/max (a partition column's value for both);
    None if the snapshot cannot be read."""
    try:
        actions = _add_actions(path, version)
    except Exception:  # the version is gone or unreadable
        return None
    names = actions.column_names
    paths = actions.column("path").to_pylist()
    sizes = [int(s) for s in actions.column("size_bytes").to_pylist()]
    if f"partition.{column}" in names:
        lo = hi = actions.column(f"partition.{column}").to_pylist()
    elif f"min.{column}" in names and f"max.{column}" in names:
        lo, hi = actions.column(f"min.{column}").to_pylist(), actions.column(f"max.{column}").to_pylist()
    else:
        lo = hi = [None] * len(paths)
    return [FileStats(p, s, a, b) for p, s, a, b in zip(paths, sizes, lo, hi)]


def _add_actions(path: Where, version: int) -> Any:
    """delta-rs's flattened add actions of the snapshot at ``version`` (a pyarrow Table; cached per write step)."""
    from deltalake import DeltaTable

    return cached_snapshot(
        ("add_actions", path, version),
        lambda: pyarrow_table(
            cached_snapshot(
                ("delta", path, version),
                lambda: DeltaTable(path, version=version, storage_options=storage.delta_options(path)),
            ).get_add_actions(flatten=True)
        ),
    )


def absolute_path(root: Where, raw: str) -> Location:
    """The file an action names by ``raw`` (URL-encoded, relative to the table's root ``root`` or absolute), with
    the table's store options (:meth:`mvsink.location.Location.file`): every read of it reaches the store as the
    table's reads do."""
    return parse(root).file(unquote(raw))


def _partition_text(value: Any) -> str | None:
    """A typed partition value (as delta-rs gives it) as the log's text: what Spark casts to the column's type."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, datetime.date):
        return value.isoformat()
    return str(value)


def snapshot_files(path: Where, version: int) -> list[ChangeFile] | None:
    """The active files of the snapshot at ``version``: absolute paths, sizes and partition values (as text),
    None if the snapshot cannot be read. Deletion vectors are not listed: only call this for a table whose
    files are plain (:func:`mvsink.core.table.plain_parquet_files`)."""
    try:
        actions = _add_actions(path, version)
    except Exception:  # the version is gone or unreadable
        return None
    parts = [n for n in actions.column_names if n.startswith("partition.")]
    values = {n.removeprefix("partition."): actions.column(n).to_pylist() for n in parts}
    out = []
    for i, (raw, size) in enumerate(
        zip(actions.column("path").to_pylist(), actions.column("size_bytes").to_pylist(), strict=True)
    ):
        pv = tuple(sorted((c, _partition_text(v[i])) for c, v in values.items()))
        out.append(ChangeFile(path=absolute_path(path, raw), partition_values=pv, size=int(size), version=version))
    return out


def active_bytes(path: Where, version: int) -> int:
    """Total size of the table's active files at ``version`` (from delta-rs's add actions)."""
    return sum(_add_action_sizes(path, version).values())
