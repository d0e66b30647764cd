"""Column names of a view's table beside the view's own columns (one owner: import them from here)."""

from __future__ import annotations

TIME = "_mv_time"  # BIGINT: the update's logical time (epoch milliseconds)
DIFF = "_mv_diff"  # BIGINT: the update's signed multiplicity
ERROR = "_mv_error"  # STRING: name of the error check a row failed (NULL on rows of the view); views with checks
RESERVED_PREFIX = "_mv_"  # user columns and check names may not start with it
# hidden per-group state of aggregate views (incremental/modes/aggregate.py); never shown to readers
STATE_PREFIX = "_mv_agg_"


def is_hidden(name: str) -> bool:
    """A column of the view's table that readers never see: the aggregate state."""
    return name.startswith(STATE_PREFIX)
