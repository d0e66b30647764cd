"""An aggregate view's state as plain values (:class:`AggregateFacts`): what the driver needs of Spark's analysis to
sum Δ per group, merge it into the persisted state and finalise the view's rows, without a Spark session.

:func:`aggregate_facts` takes them from a :class:`~mvsink.incremental.aggplan.StatePlan` (Spark's analysis);
:mod:`mvsink.incremental.driverfacts` keeps them beside the view's table for refreshes that open no Spark session.
:func:`finalised_rows` computes the view's columns of new state rows in Python where every output column is a
grouping key or a bare COUNT, SUM, AVG, MIN or MAX whose result Python gives exactly as Spark does (``finalise`` set); other
views are finalised by Spark (:func:`mvsink.incremental.aggmerge.finalised`).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Final, Literal

from mvsink.core.arrowvalues import table_from_rows
from mvsink.incremental.statequeries import (
    COUNT,
    Extreme,
    decimal_average,
    decimal_type,
    extreme_column,
    nonnull_column,
    sum_column,
)

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import SparkSession

    from mvsink.incremental.aggplan import StatePlan

FinalKind = Literal["key", "count", "nonnull", "sum", "avg", "min", "max", "expr"]
"""How a view column is finalised from a group's state in Python: the key itself, the row count, argument ``i``'s
non-null count, its SUM (NULL over no non-null value), its AVG (a double of an integer's sum, or Spark's decimal
AVG: :func:`~mvsink.incremental.statequeries.decimal_average`), its MIN or MAX (the state's extreme; NULL over no
non-null value), or Spark's decimal arithmetic over SUMs, AVGs and literals (expression ``i`` of
:attr:`AggregateFacts.exprs`: :mod:`mvsink.incremental.decimalexpr`)."""

_DOUBLE_AVG_DIGITS: Final = 15  # a decimal AVG of at most this precision goes through DOUBLE in Spark: left to it


@dataclasses.dataclass(frozen=True)
class AggregateFacts:
    """An aggregate view's state as plain values.

    ``keys``: the view's key columns and ``key_schema`` their Arrow types (Spark's); ``args``: per aggregate
    argument (whether a sum is kept, Spark's SUM and AVG result types as simple strings, or None); ``columns``:
    the table's columns of the view (visible, then state) and ``schema`` their Arrow types; ``finalise``: per
    visible column, how Python finalises it (None: Spark finalises the view); ``ansi``: Spark's ANSI mode (an AVG
    that overflows is then an error, so the full diff); ``extremes``: the MIN/MAX kept (argument index, kind; their
    columns' types are ``schema``'s).
    """

    keys: tuple[str, ...]
    key_schema: pa.Schema
    args: tuple[tuple[bool, str | None, str | None], ...]
    columns: tuple[str, ...]
    schema: pa.Schema
    finalise: tuple[tuple[str, FinalKind, int], ...] | None
    ansi: bool
    extremes: tuple[Extreme, ...] = ()
    exprs: tuple[Any, ...] = ()  # the "expr" columns' trees (:mod:`mvsink.incremental.decimalexpr`)

    @property
    def is_global(self) -> bool:
        return not self.keys

    @property
    def sum_types(self) -> tuple[str | None, ...]:
        return tuple(a[1] for a in self.args)

    @property
    def avg_types(self) -> tuple[str | None, ...]:
        return tuple(a[2] for a in self.args)

    @property
    def decimal_averages(self) -> tuple[int, ...]:
        """The arguments whose decimal AVG Python finalises (:func:`finalised_rows`)."""
        return tuple(i for _, kind, i in self.finalise or () if kind == "avg" and decimal_type(self.args[i][2]))

    def to_json(self) -> dict[str, Any]:
        from mvsink.core.schema import encode_schema

        return {
            "keys": list(self.keys),
            "key_schema": encode_schema(self.key_schema),
            "args": [list(a) for a in self.args],
            "columns": list(self.columns),
            "schema": encode_schema(self.schema),
            "finalise": None if self.finalise is None else [list(f) for f in self.finalise],
            "ansi": self.ansi,
            "extremes": [list(e) for e in self.extremes],
            "exprs": list(self.exprs),
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> AggregateFacts:
        from mvsink.core.schema import decode_schema

        fin = d["finalise"]
        return cls(
            keys=tuple(d["keys"]),
            key_schema=decode_schema(d["key_schema"]),
            args=tuple((bool(a[0]), a[1], a[2]) for a in d["args"]),
            columns=tuple(d["columns"]),
            schema=decode_schema(d["schema"]),
            finalise=None if fin is None else tuple((str(c), k, int(i)) for c, k, i in fin),
            ansi=bool(d["ansi"]),
            extremes=tuple((int(i), str(k)) for i, k in d.get("extremes", [])),
            exprs=tuple(d.get("exprs", [])),
        )


def aggregate_facts(spark: SparkSession, plan: StatePlan) -> AggregateFacts:
    """:class:`AggregateFacts` of Spark's analysis of the view's state (``plan``)."""
    import pyarrow as pa
    from pyspark.sql.pandas.types import to_arrow_type

    from mvsink.incremental.statequeries import KEY_COLUMN
    from mvsink.spark.sources import arrow_table_schema

    q = plan.queries
    assert plan.input is not None
    in_types = {f.name: f.dataType for f in plan.input.schema.fields}
    key_schema = pa.schema([pa.field(k, to_arrow_type(in_types[KEY_COLUMN.format(i)])) for i, k in enumerate(q.keys)])
    args = tuple((with_sum, plan.sum_types[i], plan.avg_types[i]) for i, (_, with_sum) in enumerate(q.args))
    schema = plan.desired.schema
    types = {f.name: f.dataType.simpleString() for f in schema.fields}
    exprs: list[Any] = []
    finalise = python_finalise(q.finalise, keys=q.keys, args=args, types=types, expressions=exprs)
    return AggregateFacts(
        keys=tuple(q.keys),
        key_schema=key_schema,
        args=args,
        columns=tuple(plan.desired.columns),
        schema=arrow_table_schema(schema),
        finalise=finalise,
        ansi=str(spark.conf.get("spark.sql.ansi.enabled", "true")).strip().lower() == "true",
        extremes=q.extremes,
        exprs=tuple(exprs) if finalise is not None else (),
    )


_FORMS = (
    (re.compile(rf"{re.escape(COUNT)}", re.I), "count"),
    (re.compile(r"_mv_agg_n(\d+)", re.I), "nonnull"),
    (re.compile(r"_mv_final_sum\((\d+)\)", re.I), "sum"),
    (re.compile(r"_mv_final_avg\((\d+)\)", re.I), "avg"),
    (re.compile(r"_mv_final_min\((\d+)\)", re.I), "min"),
    (re.compile(r"_mv_final_max\((\d+)\)", re.I), "max"),
)


def python_finalise(
    finalise: Sequence[tuple[str, str]],
    *,
    keys: Sequence[str],
    args: Sequence[tuple[bool, str | None, str | None]],
    types: dict[str, str],
    expressions: list[Any] | None = None,
) -> tuple[tuple[str, FinalKind, int], ...] | None:
    """How Python finalises each visible column (``finalise``: the state queries' Spark SQL per column; ``types``:
    Spark's type of each column, as simple strings), or None where one is not a key or a bare COUNT/SUM/AVG of the
    type that aggregate gives, or is a decimal AVG Spark computes through DOUBLE (precision up to 15). With
    ``expressions`` (a list the trees are appended to), also decimal arithmetic over SUMs, AVGs and literals whose
    type, as :mod:`mvsink.incremental.decimalexpr` derives it, is the column's."""
    from mvsink.spark.transforms import quote_name

    out: list[tuple[str, FinalKind, int]] = []
    for column, sql in finalise:
        if column in keys and sql == quote_name(column):
            out.append((column, "key", keys.index(column)))
            continue
        for pattern, kind in _FORMS:
            m = pattern.fullmatch(sql.strip())
            if m is None:
                continue
            i = int(m.group(1)) if m.groups() else 0
            if kind == "count" or kind == "nonnull":
                want: str | None = "bigint"
            elif kind == "sum":
                want = args[i][1]
            elif kind in ("min", "max"):  # (the extreme's type is its argument's: the state column's)
                want = types.get(extreme_column(kind, i))
            else:
                want = args[i][2]
                dt = decimal_type(want)
                if dt is not None and dt[0] <= _DOUBLE_AVG_DIGITS:
                    return None
                if dt is None and want != "double":
                    return None
            if want is None or types.get(column) != want:
                return None
            out.append((column, kind, i))  # type: ignore[arg-type]
            break
        else:
            node = None if expressions is None else _decimal_expression(sql, args, types.get(column))
            if node is None or expressions is None:
                return None
            out.append((column, "expr", len(expressions)))
            expressions.append(node)
    return tuple(out)


def _expression_types(args: Sequence[tuple[bool, str | None, str | None]]) -> Any:
    """Spark's SUM or AVG type of argument ``i`` where Python computes it as Spark does, else None."""

    def types(kind: str, i: int) -> str | None:
        if i >= len(args):
            return None
        with_sum, sum_type, avg_type = args[i]
        if not with_sum:
            return None
        if kind == "sum":
            return sum_type
        dt = decimal_type(avg_type)
        return avg_type if dt is not None and dt[0] > _DOUBLE_AVG_DIGITS else None

    return types


def _decimal_expression(sql: str, args: Sequence[tuple[bool, str | None, str | None]], want: str | None) -> Any:
    """The tree of decimal arithmetic ``sql`` whose type is Spark's ``want`` for the column, or None."""
    from mvsink.incremental.decimalexpr import parse, result_type

    node = parse(sql)
    if node is None or node[0] not in ("+", "-", "*", "/"):
        return None
    t = result_type(node, _expression_types(args))
    return node if t is not None and want is not None and f"decimal({t[0]},{t[1]})" == want.replace(" ", "") else None


def sum_arrow_type(type_name: str | None) -> pa.DataType | None:
    """The Arrow type of Spark's SUM result type (BIGINT or DECIMAL(p,s)), else None."""
    import pyarrow as pa

    if type_name == "bigint":
        return pa.int64()
    dt = decimal_type(type_name)
    return pa.decimal128(*dt) if dt is not None else None


def finalised_rows(facts: AggregateFacts, rows: list[dict[str, Any]]) -> pa.Table | str:
    """The view's rows (its columns, the state included, in :attr:`AggregateFacts.columns`' order) of new state rows
    (keys and state columns), finalised in Python (``facts.finalise``), in the table's Arrow types; or why not (an
    AVG that overflows its type under ANSI: Spark's error, so the full diff)."""
    import decimal

    import pyarrow as pa

    assert facts.finalise is not None
    final = {c: (kind, i) for c, kind, i in facts.finalise}
    out: list[dict[str, Any]] = []
    for row in rows:
        new: dict[str, Any] = {}
        for c in facts.columns:
            if c not in final:  # a state column
                new[c] = row[c]
                continue
            kind, i = final[c]
            if kind == "expr":
                got = _expression_value(facts, i, row)
                if isinstance(got, str):
                    return got
                new[c] = got
            elif kind == "key":
                new[c] = row[c]
            elif kind == "count":
                new[c] = row[COUNT]
            elif kind == "nonnull":
                new[c] = row[nonnull_column(i)]
            elif kind in ("min", "max"):
                new[c] = row[extreme_column(kind, i)] if row[nonnull_column(i)] else None
            else:
                n, total = row[nonnull_column(i)], row.get(sum_column(i))
                if not n or total is None:
                    new[c] = None
                elif kind == "sum":
                    new[c] = total
                elif facts.args[i][2] == "double":  # AVG of integers: double(sum) / double(count), as Spark's SQL
                    new[c] = float(total) / float(n)
                else:
                    p, s = decimal_type(facts.args[i][2]) or (38, 18)
                    avg = decimal_average(decimal.Decimal(total), n, precision=p, scale=s)
                    if avg is None and facts.ansi:
                        return "an affected group's AVG overflows its type (the full diff: Spark's error)"
                    new[c] = avg
        out.append(new)
    try:
        return table_from_rows(out, pa.schema([facts.schema.field(c) for c in facts.columns]))
    except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
        return f"a finalised value does not fit the table's type ({exc})"


def _expression_value(facts: AggregateFacts, i: int, row: dict[str, Any]) -> Any:
    """Expression ``i``'s value over a state row, or why not (Spark raises: the full diff)."""
    import decimal

    from mvsink.incremental.decimalexpr import Overflow, evaluate

    types = _expression_types(facts.args)

    def value(kind: str, j: int) -> decimal.Decimal | None:
        n, total = row[nonnull_column(j)], row.get(sum_column(j))
        if not n or total is None:
            return None
        if kind == "sum":
            return decimal.Decimal(total)
        p, s = decimal_type(types("avg", j)) or (38, 18)
        avg = decimal_average(decimal.Decimal(total), n, precision=p, scale=s)
        if avg is None and facts.ansi:
            raise Overflow("an AVG beyond its type")
        return avg

    try:
        return evaluate(facts.exprs[i], value, types, ansi=facts.ansi)
    except Overflow as exc:
        return f"an affected group's value overflows (the full diff: Spark's error): {exc}"
