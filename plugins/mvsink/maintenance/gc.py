"""``mvsink gc``: staged batches that can never commit, and batch folders no commit names."""

from __future__ import annotations

import time

from mvsink import settings
from mvsink.core import storage
from mvsink.core.batch import parse_batch_id
from mvsink.core.staging import BATCHES, batch_location, collect_garbage, committed_in_log, list_staged
from mvsink.location import Where, joinpath


def orphan_dirs(table: Where, *, grace_seconds: float | None = None) -> list[str]:
    """Batch folders with no manifest that no append commit names, untouched for ``grace_seconds``.

    Such a folder is what a crash between deleting a dead batch's files and its manifest, or a
    manifest removed by hand, leaves behind. A batch in flight always has a manifest (written
    before Spark writes a file), so it is never one of these. Lists every batch folder: meant for
    ``mvsink gc``, not for every refresh.
    """
    grace = settings.staging_grace_seconds() if grace_seconds is None else grace_seconds
    root = joinpath(table, BATCHES)
    entries = storage.list_dir(root)
    if not entries:
        return []
    staged = set(list_staged(table))
    now = time.time()
    candidates = []
    for d in entries:
        if not d.is_dir or d.name in staged or parse_batch_id(d.name) is None:
            continue
        # an object store's "folder" has no time of its own: its files' last-modified times count
        newest = max([d.mtime_ms, *(f.mtime_ms for f in storage.list_dir(joinpath(root, d.name)))]) / 1000
        if now - newest >= grace:
            candidates.append(d.name)
    if not candidates:
        return []
    in_log = committed_in_log(table, candidates, slack_seconds=float("inf"))
    return sorted(b for b in candidates if b not in in_log)


def gc(
    table: Where, *, upper: int, active: set[str], grace_seconds: float | None = None, dry_run: bool = False
) -> dict[str, list[str]]:
    """``mvsink gc``: :func:`collect_garbage`, then orphan batch folders; reports what is kept and why.

    Returns ``discarded`` (dead batches deleted), ``settled`` (committed batches whose manifest was
    dropped), ``orphans`` (manifest-less, never committed folders deleted), ``kept`` (batches that
    may still commit or whose write is younger than the grace period).
    """
    done = collect_garbage(table, upper=upper, active=active, grace_seconds=grace_seconds, dry_run=dry_run)
    orphans = orphan_dirs(table, grace_seconds=grace_seconds)
    if not dry_run:
        for b in orphans:
            storage.delete_dir(batch_location(table, b))
    gone = set(done["discarded"]) | set(done["settled"])
    return {**done, "orphans": orphans, "kept": [b for b in list_staged(table) if b not in gone]}
