"""The DuckDB full diff's decisions that read no data (incremental/modes/duckdbdiff.py): which of DuckDB's result
types cast to Spark's exactly, which Spark column types it groups as Spark does, and the refusals from the view and
the session, in their order. Stand-ins for the plan and the session: no Spark (the real runs are
tests/spark/test_full_diff_duckdb.py)."""

from __future__ import annotations

import types
from typing import Any

import pyarrow as pa
import pytest
from pyspark.sql import types as T

from mvsink.incremental.modes import duckdbdiff
from mvsink.incremental.modes.duckdbdiff import _groupable, _same_kind, full_diff_refused
from mvsink.incremental.partreads import named_columns

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("duck", "want", "ok"),
    [
        ("DECIMAL(38,2)", pa.decimal128(12, 2), True),  # Spark's scale: a value beyond 12 digits fails the cast
        ("DECIMAL(38,4)", pa.decimal128(12, 2), False),  # another scale would round
        ("BIGINT", pa.int32(), True),  # year(): a BIGINT, cast back (an overflow fails)
        ("HUGEINT", pa.int64(), True),
        ("DOUBLE", pa.int64(), False),
        ("VARCHAR", pa.string(), True),
        ("DATE", pa.date32(), True),
        ("BOOLEAN", pa.bool_(), True),
        ("VARCHAR", pa.date32(), False),
        ("TIMESTAMP WITH TIME ZONE", pa.timestamp("us", tz="UTC"), False),
    ],
)
def test_which_duckdb_types_cast_back_to_sparks(duck: str, want: pa.DataType, ok: bool) -> None:
    assert (_same_kind(duck, want) is None) is ok


def test_only_exact_types_are_grouped_in_duckdb() -> None:
    for dt in (T.IntegerType(), T.LongType(), T.DecimalType(12, 2), T.StringType(), T.DateType(), T.BooleanType()):
        assert _groupable(dt), dt
    for dt in (
        T.DoubleType(),
        T.FloatType(),
        T.TimestampType(),
        T.StringType("UTF8_LCASE"),
        T.ArrayType(T.IntegerType()),
        T.StructType([T.StructField("a", T.IntegerType())]),
    ):
        assert not _groupable(dt), dt


def test_a_star_selects_every_column() -> None:
    assert named_columns("SELECT * FROM a JOIN b ON a.k = b.k") is None
    assert named_columns("SELECT a.* FROM a") is None
    assert named_columns("SELECT count(x) AS n, k FROM a GROUP BY k") == {"x", "k"}


def _inputs(**over: Any) -> tuple[Any, Any]:
    fields = [T.StructField("k", T.LongType()), T.StructField("v", T.DecimalType(10, 2))]
    result = types.SimpleNamespace(schema=T.StructType(fields))
    plan = types.SimpleNamespace(state=None, result=result, plan_readable=True, tree="the plan could not be read: x")
    conf = {"spark.sql.ansi.enabled": "true"}
    inputs = types.SimpleNamespace(
        view=types.SimpleNamespace(checks=[], name="v", query="SELECT k, v FROM s"),
        with_error=False,
        desc=types.SimpleNamespace(sources=[types.SimpleNamespace(kind="path", name="s")]),
        spark=types.SimpleNamespace(conf=types.SimpleNamespace(get=conf.get)),
    )
    for k, v in over.items():
        target, _, attr = k.partition("__")
        obj = plan if target == "plan" else inputs
        setattr(obj, attr, v)
    if "ansi" in over:
        conf["spark.sql.ansi.enabled"] = over["ansi"]
    plan.desired = plan.result  # (PlanFacts.desired of a view without state)
    return plan, inputs


@pytest.mark.parametrize(
    ("over", "why"),
    [
        ({}, "the plan could not be read"),
        ({"inputs__view": types.SimpleNamespace(checks=[object()], name="v")}, "the view has checks"),
        ({"inputs__with_error": True}, "the view has checks"),
        (
            {"plan__result": types.SimpleNamespace(schema=T.StructType([T.StructField("p", T.DoubleType())]))},
            "column 'p' is of type double",
        ),
        ({"ansi": "false"}, "not in ANSI mode"),
        ({"plan__plan_readable": False}, "gives no typed plan"),
    ],
)
def test_refusals_from_the_view_and_the_session(over: dict[str, Any], why: str) -> None:
    plan, inputs = _inputs(**over)
    got = full_diff_refused(plan, inputs)
    assert got is not None and why in got, got


def test_the_setting_turns_it_off_first(monkeypatch) -> None:
    monkeypatch.setenv("MVSINK_DUCKDB_FULL_DIFF", "off")
    plan, inputs = _inputs()
    assert full_diff_refused(plan, inputs) == "MVSINK_DUCKDB_FULL_DIFF is off"
    assert duckdbdiff.duckdb_full_diff(plan, inputs) == "MVSINK_DUCKDB_FULL_DIFF is off"
