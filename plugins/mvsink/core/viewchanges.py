"""A view source's change set: the upstream view's own updates between two reads. Log only, no Spark.

A view that reads ``{view: up}`` reads ``up``'s contents at its batch's time ``t`` from the Delta version
``v`` of ``up``'s table that mint chose: the updates with ``_mv_time <= t``, consolidated per row (its ok
rows, without hidden state). The last refresh read ``(v0, t0)``, this one reads ``(v1, t1)``. The change
between the two is ``up``'s update log restricted to ``t0 < _mv_time <= t1`` at ``v1`` (what ``mvsink
changes`` returns) when three things hold:

1. *Nothing rewrote the times up to t0.* Every commit after ``v0`` is one of ``up``'s own mvsink commits:
   an append stamps its corrections at its batch's ``upper - 1 >= lower >= upper(v0) > t0``, and create,
   bump and evolve change no contents. A compaction to since ``S`` moves every update with time ``<= S``
   to ``S``: harmless while ``S <= t0``; past ``t0`` it merges the history before the last read into the
   range, which can then no longer be told apart (the since of ``v1`` is checked).
2. *The two contents hold no negative multiplicity.* A read clamps a row's negative sum to zero, which is
   not linear. Contents at a time ``t`` are exact (each row's sum is its count in ``up``'s desired
   result, never negative) when no foreign commit came after the newest append of ``up`` whose stamp is
   ``<= t``: that append made the contents at its stamp exactly desired, and every later append of
   ``up`` keeps them so. So the log is walked from ``v1`` back to the newest append with stamp ``<= t0``
   (it is at or before ``v0``): any commit on the way that mvsink did not make (a hand edit, another
   tool, a commit of another view) means the change set cannot be trusted.
3. The table is the one the last refresh read (same Delta table id): mint checks that.

The files to read are the active files at ``v1`` whose ``_mv_time`` statistics overlap ``(t0, t1]``: each
append's batch holds one time, and a compaction's consolidated file sits at ``since <= t0``, so in the
usual case these are exactly the batches appended in between. No file: nothing changed.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import TYPE_CHECKING
from urllib.parse import unquote

from mvsink.columns import TIME
from mvsink.core.commitinfo import CONTENT_PRESERVING
from mvsink.core.deltalog import read_commit
from mvsink.core.table import ViewTable
from mvsink.location import Location, Where
from mvsink.times import format_time

if TYPE_CHECKING:
    from mvsink.core.batch import SourceRead

# Our commits whose effect on contents is known: appends stamp at or past the upper they start from;
# the others change no contents (a compaction none at times >= its since).
KNOWN_OPERATIONS = CONTENT_PRESERVING | {"append"}
# How many commits of the upstream's log a check may read (back to its append before the last read).
HISTORY_LIMIT = 200


@dataclasses.dataclass(frozen=True)
class ViewChanges:
    """The files of a view source's table that may hold its updates in ``(from_time, to_time]``."""

    files: tuple[Location, ...]  # active files at the source's version whose times overlap the range
    bytes: int  # their size
    total_bytes: int  # the size of every active file at that version

    @property
    def empty(self) -> bool:
        return not self.files


def view_changes(s: SourceRead, *, base_version: int, base_time: int, time: int) -> ViewChanges | str:
    """The files holding view source ``s``'s updates in ``(base_time, time]`` at ``s.version``, or why its
    change since the last read (at version ``base_version``, time ``base_time``) cannot be used.

    Cached per arguments (the commit files and a version's snapshot never change; a re-created table has
    another id, which ``s`` carries).
    """
    return _view_changes(s, base_version, base_time, time)


@functools.lru_cache(maxsize=64)
def _view_changes(s: SourceRead, base_version: int, base_time: int, time: int) -> ViewChanges | str:
    name = s.view or s.name
    if s.version < 0:
        return f"view {name}'s table does not exist"
    if base_version > s.version or base_time > time:
        return f"the last refresh read view {name} at version {base_version}, after this one's {s.version}"
    table = ViewTable.open_path(s.path, name, version=s.version, check=False)  # write's read checks it
    fr = table.frontier
    if fr.since > base_time:
        return (
            f"view {name} was compacted to since {format_time(fr.since)} ({fr.since}), past {base_time}, "
            "the time the last refresh read it: its changes since then are merged into older history"
        )
    why = _trusted_since(s.path, name, s.version, base_time)
    if why:
        return why
    if table.delta.metadata().partition_columns:
        return f"view {name}'s table is partitioned"
    actions = table.delta.get_add_actions(flatten=True)  # (arro3's table: no pyarrow import on the no-change path)
    if not actions.num_rows:
        return ViewChanges(files=(), bytes=0, total_bytes=0)
    cols = actions.column_names
    paths = actions.column("path").to_pylist()
    sizes = [int(x) for x in actions.column("size_bytes").to_pylist()]
    lows = actions.column(f"min.{TIME}").to_pylist() if f"min.{TIME}" in cols else [None] * len(paths)
    highs = actions.column(f"max.{TIME}").to_pylist() if f"max.{TIME}" in cols else [None] * len(paths)
    files, size = [], 0
    for path, n, lo, hi in zip(paths, sizes, lows, highs):
        if (hi is not None and int(hi) <= base_time) or (lo is not None and int(lo) > time):
            continue  # the statistics prove the file holds no update in the range
        files.append(s.path.file(unquote(path)))
        size += n
    return ViewChanges(files=tuple(files), bytes=size, total_bytes=sum(sizes))


def _trusted_since(path: Where, name: str, version: int, base_time: int) -> str | None:
    """Why the contents of ``name``'s table at ``version`` are not exact at ``base_time`` and after (None:
    they are): a commit mvsink did not make after the newest append stamped at or before ``base_time``."""
    for v in range(version, max(version - HISTORY_LIMIT, -1), -1):
        commit = read_commit(path, v)
        if commit is None:
            return f"commit {v} of view {name}'s table is no longer in its log"
        info = commit.info
        if info is None:
            op = commit.commit_info.get("operation", "unknown")
            return (
                f"view {name}'s table has a commit mvsink did not make (version {v}, {op}: a hand edit or "
                f"another writer) since the contents the last refresh read"
            )
        if info.view is not None and info.view != name:
            return f"view {name}'s table has a commit of another view ({info.view}, version {v})"
        if info.operation not in KNOWN_OPERATIONS:
            return f"view {name}'s table has a {info.operation} commit (version {v}) this version does not know"
        if info.operation == "append" and info.upper is not None and int(info.upper) - 1 <= base_time:
            return None  # the newest append at or before the last read: exact from here on
        if v == 0:
            return None  # the table's creation: nothing before it
    return f"view {name}'s table has more than {HISTORY_LIMIT} commits since the contents the last refresh read"
