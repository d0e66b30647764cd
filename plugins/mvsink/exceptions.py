"""Project exceptions, in two branches:

- :class:`MvSinkError` (a ``ValueError``): bad input the user must fix (a view file, a missing
  source table, a parameter, a setting). Retrying does not help: the command line exits 2, an
  Airflow task fails at once without its retries.
- :class:`MvSinkRuntimeError` (a ``RuntimeError``): a failure that a retry may fix (the Spark
  job crashed, append kept losing commit races, the table's store failed). The command line
  exits 1, an Airflow task is retried.

Every message names the view (or setting), the problem and the fix.
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

    def __init__(
        self,
        message: str,
        *,
        counts: dict[str, int] | None = None,
        sample: dict[str, object] | None = None,
        check: str = "",
    ):
        super().__init__(message)
        self.counts = counts or {}  # error rows per check
        self.sample = sample or {}  # one error row's columns
        self.check = check  # the check that sample row failed


class StagingError(MvSinkError):
    """Staged files are missing or do not match their manifest."""


class SparkSetupError(MvSinkError):
    """Spark lacks what mvsink needs (the delta-spark jars, a matching Hadoop connector): fix the setup."""


class SettingsError(MvSinkError):
    """An ``MVSINK_*`` environment variable (or Airflow ``[mvsink]`` option) has a value that does not parse."""


class MvSinkRuntimeError(RuntimeError):
    """Base class of the failures that a retry may fix (not the user's input)."""


class SparkJobError(MvSinkRuntimeError):
    """The Spark write step failed (the spark-submit process exited non-zero or left no report)."""

    def __init__(self, message: str, *, exit_code: int | None = None, output: str = ""):
        super().__init__(message)
        self.exit_code = exit_code
        self.output = output  # the last lines the job printed (shown by ``mvsink -v``)


class SparkConnectUnavailableError(MvSinkRuntimeError):
    """No Spark Connect server answers at the address given (down, restarting, or unreachable): a retry may pass."""


class CommitRaceError(MvSinkRuntimeError):
    """append lost its commit race too many times in a row to unrelated commits."""


class StoreError(MvSinkRuntimeError):
    """The table's storage (delta-rs) failed for a reason other than a lost commit race."""


class InjectedFault(MvSinkRuntimeError):
    """Raised at a fail point named in ``MVSINK_FAIL_POINTS`` (tests only)."""


class UnsafePathError(ViewDefinitionError):
    """A view's path leaves the data root (or its folder, for sql_file) without the option that allows it."""


class UnsafeStoreError(MvSinkError):
    """A location's store accepts a second create of the same key: compare_and_append would not be safe there."""


class MissingBucketError(MvSinkError):
    """A location's bucket or container does not exist on its store."""


class StoreAccessError(MvSinkError):
    """A location's store refuses the credentials given for it (the message names the variable or option)."""
