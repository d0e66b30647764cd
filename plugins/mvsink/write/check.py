"""``mvsink check [VIEWS_DIR]``: every view file of a folder checked before it is deployed.

Each file is parsed (as the DAG processor does), each query analysed against its sources' schemas on one Spark
session (the analysis the write step makes: :func:`mvsink.spark.validation.analyse`, determinism included), and
each source's refresh mode reported as ``mvsink explain`` does (:func:`mvsink.write.explain.explain_view`). A view
source whose upstream view has no table yet stands in as an empty table of the upstream query's columns: the query
is analysed, its modes are not reported (``mvsink explain`` needs the upstream's table).
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mvsink.core.table import ViewTable
from mvsink.definitions.catalog import Catalog
from mvsink.exceptions import MvSinkError
from mvsink.spark.conf import apply_storage_conf, check_connectors
from mvsink.spark.sources import Snapshot
from mvsink.spark.validation import analyse, compare_schema
from mvsink.write.explain import _register_sources, explain_view

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.types import StructType

    from mvsink.definitions.view import ViewDefinition


@dataclasses.dataclass(frozen=True)
class ViewCheck:
    """One view file's verdict: ``problem`` (the error's message: the view, the problem, the fix) or None, and
    for a good view the refresh mode a change of each source would take (``source → mode``)."""

    file: str
    view: str | None
    problem: str | None = None
    modes: tuple[str, ...] = ()
    note: str | None = None

    @property
    def ok(self) -> bool:
        return self.problem is None


@dataclasses.dataclass(frozen=True)
class CheckReport:
    """Every view file's verdict, in file order."""

    views_dir: str
    checks: tuple[ViewCheck, ...]

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.checks)

    def to_dict(self) -> dict[str, Any]:
        return {"views_dir": self.views_dir, "ok": self.ok, "views": [dataclasses.asdict(c) for c in self.checks]}

    def summary(self) -> str:
        """One line per view file (``ok`` or ``FAIL``), a good view's modes indented below, then a count."""
        lines = []
        for c in self.checks:
            if c.problem is not None:
                lines.append(f"FAIL {c.file}: {' '.join(c.problem.split())}")
                continue
            lines.append(f"ok   {c.file}: view {c.view}")
            lines += [f"       {m}" for m in c.modes]
            if c.note:
                lines.append(f"       {c.note}")
        bad = sum(not c.ok for c in self.checks)
        lines.append(
            f"{len(self.checks)} view file(s) checked in {self.views_dir}: "
            + (f"{bad} with problems" if bad else "all good")
        )
        return "\n".join(lines)


def session_conf(catalog: Catalog) -> dict[str, str]:
    """The settings of the one session that checks every view: each view's store settings and ``spark_conf``."""
    from mvsink.spark.conf import storage_conf

    out: dict[str, str] = {}
    for view in catalog.views.values():
        out.update(storage_conf(view))
        out.update(view.spark_conf)
    return out


def check_views(catalog: Catalog, *, spark: SparkSession) -> CheckReport:
    """Check every view file of ``catalog``'s folder on ``spark`` (see the module docstring)."""
    by_file: dict[str, ViewCheck] = {
        f: ViewCheck(file=_shown(f), view=None, problem=str(err)) for f, err in catalog.errors.items()
    }
    schemas: dict[str, StructType] = {}  # each good view's result columns, for the views over it
    with _quiet_analysis_errors():
        for view in _upstream_first(catalog):
            by_file[str(view.file)] = _check_one(view, catalog=catalog, spark=spark, schemas=schemas)
    return CheckReport(views_dir=str(catalog.views_dir), checks=tuple(by_file[f] for f in sorted(by_file)))


@contextlib.contextmanager
def _quiet_analysis_errors() -> Iterator[None]:
    """pyspark logs each failed ``spark.sql`` at ERROR with its traceback: the report already says it, once."""
    from pyspark.logger import PySparkLogger

    loggers = [PySparkLogger.getLogger(n) for n in ("SQLQueryContextLogger", "DataFrameQueryContextLogger")]
    before = [lg.disabled for lg in loggers]
    for lg in loggers:
        lg.disabled = True
    try:
        yield
    finally:
        for lg, was in zip(loggers, before):
            lg.disabled = was


def _shown(file: str | Path | None) -> str:
    return str(file) if file is not None else "(no file)"


def _upstream_first(catalog: Catalog) -> list[ViewDefinition]:
    """The loaded views, each after the views it reads (a cycle or a missing upstream: in name order)."""
    out: list[ViewDefinition] = []
    seen: set[str] = set()

    def visit(view: ViewDefinition, path: tuple[str, ...]) -> None:
        if view.name in seen or view.name in path:
            return
        for s in view.sources:
            if s.kind == "view" and s.view in catalog.views:
                visit(catalog.views[s.view], (*path, view.name))
        seen.add(view.name)
        out.append(view)

    for name in sorted(catalog.views):
        visit(catalog.views[name], ())
    return out


def _check_one(
    view: ViewDefinition, *, catalog: Catalog, spark: SparkSession, schemas: dict[str, StructType]
) -> ViewCheck:
    file = _shown(view.file)
    try:
        check_connectors(view, role="mvsink check")
        pending = [
            s
            for s in view.sources
            if s.kind == "view" and ViewTable.open(catalog.upstream(view, s), check=False).frontier.version < 0
        ]
        if pending:
            _analyse_with_stand_ins(view, catalog=catalog, spark=spark, schemas=schemas)
            names = ", ".join(sorted({str(s.view) for s in pending}))
            note = (
                f"refresh modes not reported: upstream view(s) {names} have no table yet "
                "(the query was analysed over their columns; run mvsink explain once they are refreshed)"
            )
            return ViewCheck(file=file, view=view.name, note=note)
        report = explain_view(view, catalog=catalog, spark=spark)
        schemas[view.name] = _result_schema(spark, view)
        _same_columns_as_table(view, schemas[view.name])
        modes = tuple(
            f"a change of `{s.source}` → {s.label}" + (f" ({s.why})" if s.why else "") for s in report.sources
        )
        return ViewCheck(file=file, view=view.name, modes=modes)
    except MvSinkError as exc:
        return ViewCheck(file=file, view=view.name, problem=str(exc))
    except Exception as exc:  # noqa: BLE001 (one view's unexpected failure must not hide the others' verdicts)
        text = " ".join(str(exc).split())[:500]
        return ViewCheck(
            file=file,
            view=view.name,
            problem=f"view {view.name}: checking it failed unexpectedly: {type(exc).__name__}: {text}. "
            "Fix: run mvsink -v explain on it for the traceback.",
        )
    finally:
        _drop_sources(spark, view)


def _result_schema(spark: SparkSession, view: ViewDefinition) -> StructType:
    """The view's result columns (its sources are registered: the query analyses again, cheaply)."""
    return spark.sql(view.query).schema


def _same_columns_as_table(view: ViewDefinition, result: StructType) -> None:
    """Refuse a query whose columns differ from its existing table's, as the next refresh would."""
    table = ViewTable.open(view)
    if table.exists:
        snap = Snapshot(table.path, table.frontier.version, table.delta)
        compare_schema(view, result, snap.schema)


def _analyse_with_stand_ins(
    view: ViewDefinition, *, catalog: Catalog, spark: SparkSession, schemas: dict[str, StructType]
) -> None:
    """Analyse ``view`` with an empty table of its upstream's columns for each view source without a table."""
    apply_storage_conf(spark, view)
    tables = dataclasses.replace(view, sources=tuple(s for s in view.sources if s.kind == "path"))
    _register_sources(spark, tables, catalog)
    for s in view.sources:
        if s.kind != "view":
            continue
        up = catalog.upstream(view, s)
        if ViewTable.open(up, check=False).frontier.version >= 0:
            _register_sources(spark, dataclasses.replace(view, sources=(s,)), catalog)
        elif up.name in schemas:
            spark.createDataFrame([], schemas[up.name]).createOrReplaceTempView(s.name)
        else:
            raise MvSinkError(
                f"view {view.name}: source '{s.name}' reads view {up.name}, which has no table yet and does not "
                f"check itself. Fix: correct view {up.name} first (see its line)."
            )
    analyse(spark, view)
    schemas[view.name] = _result_schema(spark, view)


def _drop_sources(spark: SparkSession, view: ViewDefinition) -> None:
    """Drop the view's sources' temp views: the next view must not see a source it does not declare."""
    for s in view.sources:
        try:
            spark.catalog.dropTempView(s.name)
        except Exception:  # noqa: BLE001,S110 (never registered: nothing to drop)
            pass
