"""Every ``MVSINK_*`` environment variable mvsink reads, as data: its name, its default as documented and what it
does (:class:`Setting`), and the lists :mod:`mvsink.settings` and the documentation go by (:data:`REGISTRY`). Reading
and validating the variables is :mod:`mvsink.settings`'s alone."""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class Setting:
    """One environment variable: its name, its default as documented, and what it does."""

    name: str
    default: str
    meaning: str
    airflow_option: str | None = None  # option of Airflow's [mvsink] section that may set it too

    @property
    def airflow_env(self) -> str | None:
        """The environment variable Airflow maps to the ``[mvsink]`` option (``AIRFLOW__MVSINK__...``)."""
        return f"AIRFLOW__MVSINK__{self.airflow_option.upper()}" if self.airflow_option else None


DATA_ROOT = Setting(
    "MVSINK_DATA_ROOT",
    "the view file's folder",
    "folder that relative source and target paths resolve against, and that every path must stay inside",
)
ALLOW_OUTSIDE_DATA_ROOT = Setting(
    "MVSINK_ALLOW_OUTSIDE_DATA_ROOT",
    "false",
    "true (1, yes, on) allows source and target paths outside the data root; an environment setting on "
    "purpose: a view file cannot grant it to itself",
)
ALLOWED_LOCATIONS = Setting(
    "MVSINK_ALLOWED_LOCATIONS",
    "unset: only the data root",
    "comma-separated location prefixes that source and target locations may lie under besides the data root "
    "(e.g. s3://lake/,az://container/views/,/mnt/shared/); object-storage locations must be under one of them",
)
VIEWS_DIR = Setting(
    "MVSINK_VIEWS_DIR", "dags/views", "folder of view files for the command line and the Python readers"
)
SPARK_JOB = Setting(
    "MVSINK_SPARK_JOB",
    "the entry script shipped in the package (mvsink/write/mv_write.py)",
    "path of the write job script that spark-submit runs",
)
SPARK_REMOTE = Setting(
    "MVSINK_SPARK_REMOTE",
    "unset (spark-submit)",
    "sc://host:port of a Spark Connect server: the CLI's default --remote. The DAGs do not read it: their "
    "write task uses Spark Connect when its Spark connection is of type spark_connect",
)
SPARK_JARS = Setting(
    "MVSINK_SPARK_JARS",
    "the .jars folder of the source checkout (filled by make install)",
    "folder of the JVM jars every Spark session gets (delta-spark, hadoop-aws, hadoop-azure: spark_jobs/pom.xml)",
)
REPORTS_DIR = Setting(
    "MVSINK_REPORTS_DIR",
    "mvsink-reports in the temporary directory",
    "where the DAG's write task leaves its report for append; must be shared by both tasks' workers",
)
CACHE_DIR = Setting(
    "MVSINK_CACHE_DIR",
    "mvsink in $XDG_CACHE_HOME (~/.cache/mvsink)",
    "folder of this machine's cache of work derived from view definitions alone (the intermediate tables a query "
    "is split into, so that a refresh with nothing to do parses no SQL); nothing in it is needed, it may be "
    "deleted at any time, and an unwritable folder only turns the cache off",
)
STAGING_GRACE_SECONDS = Setting(
    "MVSINK_STAGING_GRACE_SECONDS",
    "3600",
    "age in seconds after which an unfinished staged write counts as crashed and may be cleaned up "
    "(mvsink gc --grace-seconds overrides it)",
)
COMPACT_MEMORY = Setting(
    "MVSINK_COMPACT_MEMORY",
    "1GB",
    "DuckDB memory limit of a compaction (e.g. 512MB, 2GiB, 50%); beyond it the aggregate spills to disk",
)
INCREMENTAL_MAX_FRACTION = Setting(
    "MVSINK_INCREMENTAL_MAX_FRACTION",
    "0.5",
    "incremental refresh only while a changed source's change files are at most this fraction of its "
    "size (a number >= 0); else the full diff",
)
INCREMENTAL_MAX_SCAN_RATIO = Setting(
    "MVSINK_INCREMENTAL_MAX_SCAN_RATIO",
    "1.0",
    "an aggregate view refreshes from its state (or by affected groups) only while its change terms would read "
    "at most this many times the bytes the full diff reads (its sources and its table; a number >= 0); else the "
    "full diff",
)
COST_MODEL = Setting(
    "MVSINK_COST_MODEL",
    "true",
    "true (the default; 1, yes, on) lets the cost model pick between an aggregate's change terms and the full "
    "diff from the view's own refresh history (the table's _mv_history/): a per-mode fit of the write step's time "
    "against the bytes read, once a mode has 3 refreshes, overrides the scan guard's byte ratio when it makes the "
    "other choice more than 10% cheaper; false (0, no, off): the scan guard decides alone. The history is "
    "recorded either way",
)
COST_RECHECK_EVERY = Setting(
    "MVSINK_COST_RECHECK_EVERY",
    "10",
    "a whole number >= 0: where the cost model chose from the view's history, the alternative it passed over "
    "runs instead once it has not run for this many refreshes and its estimate is at most twice the choice's, so "
    "that a drifted estimate is measured again and corrected; 0: never",
)
INCREMENTAL_PRUNE_MIN_BYTES = Setting(
    "MVSINK_INCREMENTAL_PRUNE_MIN_BYTES",
    "8000000",
    "a change term reads another source filtered by the change's join keys (Delta skips the files whose "
    "statistics hold none) when that source's active files are over this many bytes (a whole number >= 0; "
    "smaller sources are read whole, which costs less than collecting the keys)",
)
SOURCE_READS = Setting(
    "MVSINK_SOURCE_READS",
    "auto",
    "how Spark reads a Delta snapshot: auto (its files as plain Parquet, partition values from the log, where the "
    "table's files are plain: no deletion vectors, column mapping, type widening or VARIANT, at most "
    "MVSINK_PLAIN_READ_MAX_PARTITIONS partition values; Delta's own reader otherwise) or delta (always Delta's reader)",
)
PLAIN_READ_MAX_PARTITIONS = Setting(
    "MVSINK_PLAIN_READ_MAX_PARTITIONS",
    "64",
    "a partitioned snapshot is read as plain Parquet (MVSINK_SOURCE_READS=auto) only while its files hold at most "
    "this many distinct partition values (one Parquet scan each); more go through Delta's reader",
)
INCREMENTAL_GROUPS = Setting(
    "MVSINK_INCREMENTAL_GROUPS",
    "true",
    "false (0, no, off) makes an aggregate (HAVING too), DISTINCT, UNION or per-group top-k view over a linear "
    "query that no other mode serves take the full diff, where by default it refreshes by recomputing only the "
    "groups its sources' changes touch (mode incremental:groups; 0.36-0.73x an overwrite at TPC-H SF 1, "
    "docs/benchmarks.md)",
)
INCREMENTAL_TOPK = Setting(
    "MVSINK_INCREMENTAL_TOPK",
    "true",
    "false (0, no, off) makes an ORDER BY ... LIMIT view with a declared key take the full diff instead of "
    "refreshing from its persisted top k (mode incremental:topk)",
)
INTERMEDIATE = Setting(
    "MVSINK_INTERMEDIATE",
    "true",
    "false (0, no, off) refreshes an ORDER BY ... LIMIT view over a GROUP BY (with a declared key) as one query, "
    "where by default its aggregate is kept, every group, in an intermediate table in the view's folder "
    "(<target>/_mv_inner), refreshed first, and the view is its top k",
)
INTERMEDIATE_HAVING = Setting(
    "MVSINK_INTERMEDIATE_HAVING",
    "true",
    "false (0, no, off) refreshes a GROUP BY whose HAVING compares the groups with uncorrelated scalar subqueries "
    "(TPC-H Q11) as one query, where by default it is refreshed through intermediate tables: its groups "
    "(<target>/_mv_inner) and each subquery's one row (<target>/_mv_inner2, ...), refreshed from their state, then "
    "the HAVING as a filter over them (by DuckDB without Spark where it can)",
)
INTERMEDIATE_CORRELATED = Setting(
    "MVSINK_INTERMEDIATE_CORRELATED",
    "false",
    "true (1, yes, on) refreshes a query whose WHERE (or a WHERE inside one of its subqueries, TPC-H Q20's IN) "
    "compares with a correlated scalar subquery (TPC-H Q2: the least cost of the part) through an intermediate "
    "table: the subquery grouped by its correlation key "
    "(<target>/_mv_inner), refreshed first from its state, and the query joining it; false (the default): as one "
    "query. Off by default: at TPC-H SF 1 Q2's refresh took 19.4 s through it, where its full diff took 4.4 s",
)
INCREMENTAL_PARTITIONED = Setting(
    "MVSINK_INCREMENTAL_PARTITIONED",
    "true",
    "false (0, no, off) makes a view whose query is not linear in a changed source but partitioned by a key (a "
    "correlated EXISTS, IN or scalar subquery, an outer join or an inner aggregate on the join key) take the full "
    "diff, where by default it recomputes the changed keys' partitions, new minus old (an aggregate with state "
    "through incremental:aggregate, any other view as incremental:partitioned)",
)
INCREMENTAL_DRIVER_TERMS = Setting(
    "MVSINK_INCREMENTAL_DRIVER_TERMS",
    "true",
    "false (0, no, off) makes an aggregate's change terms always run as Spark jobs, never in DuckDB in the driver "
    "(where their inputs are small plain Parquet files and the query is of the kinds DuckDB evaluates as Spark does), "
    "and a partitioned recompute's keyed sources always read by Spark, never filtered to the changed keys by DuckDB",
)
DUCKDB_FULL_DIFF = Setting(
    "MVSINK_DUCKDB_FULL_DIFF",
    "true",
    "false (0, no, off) makes every full diff run in Spark; by default the full diff of a select-project-join view "
    "over plain local Delta sources and of the kinds DuckDB evaluates as Spark does (integers, decimals, strings, "
    "dates, booleans; no checks) is computed by DuckDB in the refreshing process, without a shuffle",
)
SPARK_FREE = Setting(
    "MVSINK_SPARK_FREE",
    "true",
    "false (0, no, off) makes every write step open a Spark session; by default an aggregate view's small refresh "
    "whose plan facts a Spark refresh of the same definition and source schemas kept (the table's _mv_plans/) "
    "runs in the refreshing process without Spark",
)
DECODED_COPIES_MB = Setting(
    "MVSINK_DECODED_COPIES_MB",
    "1024",
    "megabytes of decoded copies a view keeps beside its table (_mv_decoded/): an unchanged source that DuckDB's "
    "change terms read filtered by key is written once, uncompressed, and later refreshes over the same files "
    "pick its rows from that copy instead of decompressing the source's Parquet again; 0 turns them off",
)
PLAN_FACTS_MAX_AGE = Setting(
    "MVSINK_PLAN_FACTS_MAX_AGE",
    "86400",
    "seconds the plan facts a Spark refresh kept for refreshes without Spark are used; older ones are taken "
    "again from Spark's analysis at the next refresh (a server's changed SQL settings are seen within this time)",
)
INCREMENTAL_AGGREGATE = Setting(
    "MVSINK_INCREMENTAL_AGGREGATE",
    "true",
    "false (0, no, off) makes COUNT/SUM/AVG aggregate views take the full diff instead of refreshing from their "
    "hidden per-group state (mode incremental:aggregate); the state is kept either way",
)
SPARK_CDS = Setting(
    "MVSINK_SPARK_CDS",
    "true",
    "false (0, no, off) starts Spark driver JVMs without the class-data sharing archive that make install builds "
    "(python -m mvsink.write.cdsarchive): each then loads its classes again, about 1.6 times the start-up CPU",
)
SPARK_CONN_ID = Setting(
    "MVSINK_SPARK_CONN_ID",
    "spark_default",
    "Airflow: the Spark connection of the DAGs' write task (master and extra settings)",
    airflow_option="spark_conn_id",
)
TASK_RETRIES = Setting(
    "MVSINK_TASK_RETRIES",
    "2",
    "Airflow: retries of every task of a view's DAG after a runtime failure (bad input fails at once)",
    airflow_option="task_retries",
)
TASK_RETRY_DELAY_SECONDS = Setting(
    "MVSINK_TASK_RETRY_DELAY_SECONDS",
    "10",
    "Airflow: delay between those tries, in seconds",
    airflow_option="task_retry_delay_seconds",
)
MAX_RESCHEDULES = Setting(
    "MVSINK_MAX_RESCHEDULES",
    "3",
    "Airflow: new runs started for one refresh time after lost races, before append fails",
    airflow_option="max_reschedules",
)

#: Every setting of the project, in the order the documentation lists them.
REGISTRY: tuple[Setting, ...] = (
    DATA_ROOT,
    ALLOW_OUTSIDE_DATA_ROOT,
    ALLOWED_LOCATIONS,
    VIEWS_DIR,
    SPARK_JOB,
    SPARK_REMOTE,
    SPARK_JARS,
    SPARK_CDS,
    SPARK_CONN_ID,
    MAX_RESCHEDULES,
    TASK_RETRIES,
    TASK_RETRY_DELAY_SECONDS,
    REPORTS_DIR,
    CACHE_DIR,
    STAGING_GRACE_SECONDS,
    COMPACT_MEMORY,
    INCREMENTAL_MAX_FRACTION,
    INCREMENTAL_MAX_SCAN_RATIO,
    COST_MODEL,
    COST_RECHECK_EVERY,
    INCREMENTAL_PRUNE_MIN_BYTES,
    SOURCE_READS,
    PLAIN_READ_MAX_PARTITIONS,
    INCREMENTAL_AGGREGATE,
    INCREMENTAL_DRIVER_TERMS,
    DUCKDB_FULL_DIFF,
    SPARK_FREE,
    DECODED_COPIES_MB,
    PLAN_FACTS_MAX_AGE,
    INCREMENTAL_GROUPS,
    INCREMENTAL_TOPK,
    INTERMEDIATE,
    INTERMEDIATE_HAVING,
    INTERMEDIATE_CORRELATED,
    INCREMENTAL_PARTITIONED,
)

#: Settings that Airflow's ``[mvsink]`` section may also set.
AIRFLOW_SETTINGS: tuple[Setting, ...] = tuple(s for s in REGISTRY if s.airflow_option)

#: Variables only the test suite sets; :mod:`mvsink.core.failpoints` reads them itself.
TEST_ONLY: tuple[Setting, ...] = (
    Setting("MVSINK_FAIL_POINTS", "unset", "tests only: fail points to arm (see mvsink.core.failpoints)"),
    Setting("MVSINK_SYNC_DIR", "unset", "tests only: folder of the fail points' .ready, .go and .fired files"),
)

#: ``MVSINK_*`` words in the code that are not variables: line prefixes of the write job's output.
NOT_VARIABLES: tuple[str, ...] = ("MVSINK_REPORT", "MVSINK_ERROR")

#: Variables the spark-submit process of the DAG's write task inherits from the task.
#: (spark-submit also inherits the task's whole environment; these are fixed when the DAG is parsed.)
SPARK_JOB_ENV: tuple[str, ...] = (
    DATA_ROOT.name,
    ALLOWED_LOCATIONS.name,
    REPORTS_DIR.name,
    *(s.name for s in TEST_ONLY),
)
