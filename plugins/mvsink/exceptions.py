"""Project exceptions.

Every error a user can cause is a :class:`MvSinkError` (a ``ValueError``) whose
message names the view, the problem and the fix.
"""

from __future__ import annotations


class MvSinkError(ValueError):
    """Base class of every user-facing error of the project."""


class ViewDefinitionError(MvSinkError):
    """A view file is invalid (bad YAML, missing or invalid field)."""


class SourceError(MvSinkError):
    """A source table is missing, unreadable, or did not exist at the refresh time."""


class UnsupportedFeatureError(MvSinkError):
    """A Delta table uses a reader feature that a Parquet file-list read cannot honour."""


class QueryError(MvSinkError):
    """The view's query fails to analyse, or produces columns the table cannot hold."""


class SchemaChangedError(MvSinkError):
    """The view's query now produces other columns than the table holds."""


class ReadTimeError(MvSinkError):
    """A read asked for a time the table cannot answer (below since/as_of, at or past upper)."""


class ViewErrorsError(MvSinkError):
    """A read found rows in the view's error collection (rows that failed an ``error`` check)."""

    def __init__(self, message: str, *, counts: dict[str, int] | None = None, sample: dict[str, object] | None = None,
                 check: str = ""):
        super().__init__(message)
        self.counts = counts or {}  # error rows per check
        self.sample = sample or {}  # one error row's columns
        self.check = check  # the check that sample row failed


class StagingError(MvSinkError):
    """Staged files are missing or do not match their manifest."""


class InjectedFault(RuntimeError):
    """Raised at a fail point named in ``MVSINK_FAIL_POINTS`` (tests only)."""


class UnsafePathError(ViewDefinitionError):
    """A view's path leaves the data root (or its folder, for sql_file) without the option that allows it."""
