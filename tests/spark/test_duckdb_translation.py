"""The differential test of the DuckDB translation (engines/duckdbsql.py, used by incremental/duckdbterms.py).

Random expressions over a broad grammar (casts between integers, decimals, strings, dates, booleans, doubles,
timestamps and timestamp_ntz; decimal arithmetic at the precision limits; integer division and modulo of negatives;
ROUND/FLOOR/CEIL; string functions on non-ASCII; dates and intervals; timestamps under a non-UTC session zone;
comparisons, AND/OR/NOT, IS NULL, IN, <=>, NULL, NaN, -0.0, overflow) over a small table of awkward values. Each
expression's analysed plan is judged by :func:`mvsink.engines.duckdbsql.unsupported`; every accepted one is evaluated by
Spark and by DuckDB through the translation (the table read as :func:`duckdb_schema` gives it, as the driver reads
sources) and compared per row by value and type: no difference is allowed. A DuckDB error where Spark gives a value
is a fallback (the driver then lets Spark compute the terms) and is counted apart; a DuckDB value where Spark fails
is a difference.

``--translator-seed`` and ``--translator-cases`` (tests/conftest.py) pick the cases; the default is 1,000.
"""

from __future__ import annotations

import datetime as dt
import logging
import random
import time
from collections import Counter
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from mvsink.engines.duckdbsql import Untranslatable
from mvsink.engines.duckdbtext import as_spark_types, duckdb_schema
from mvsink.incremental.duckdbterms import _duckdb_sql, unsupported
from mvsink.plan.tree import PlanNode

pytestmark = pytest.mark.spark

ZONE = "America/Los_Angeles"
BATCH = 80
D = Decimal
UTC = dt.UTC


def awkward_rows() -> pa.Table:
    """Ten rows of extremes: NULLs, empty and padded strings, non-ASCII, decimal limits, -0.0 and NaN, old dates."""
    big18, big38 = D("999999999999.999999"), D("9999999999999999999999999999.9999999999")
    return pa.table(
        {
            "rid": pa.array(range(10), pa.int32()),
            "i8": pa.array([0, 1, -1, 127, -128, None, 5, -7, 2, 100], pa.int8()),
            "i16": pa.array([0, 1, -1, 32767, -32768, None, 300, -7, 2, 1000], pa.int16()),
            "i32": pa.array([0, 1, -1, 2**31 - 1, -(2**31), None, 3, -7, 2, 100000], pa.int32()),
            "i64": pa.array([0, 1, -1, 2**63 - 1, -(2**63), None, 3, -7, 2, 10**12], pa.int64()),
            "d12": pa.array(
                [
                    D(0),
                    D("0.01"),
                    D("-0.01"),
                    D("9999999999.99"),
                    D("-9999999999.99"),
                    None,
                    D("3.5"),
                    D("-7.25"),
                    D("2.5"),
                    D(1),
                ],
                pa.decimal128(12, 2),
            ),  # fmt: skip
            "d18": pa.array(
                [
                    D(0),
                    D("0.000001"),
                    D("-0.000001"),
                    big18,
                    big18.copy_negate(),
                    None,
                    D("3.5"),
                    D("-2.5"),
                    D(1000000),
                    D("1.5"),
                ],
                pa.decimal128(18, 6),
            ),
            "d38": pa.array(
                [
                    D(0),
                    D("1E-10"),
                    D("-1E-10"),
                    big38,
                    big38.copy_negate(),
                    None,
                    D("3.5"),
                    D("-0.5"),
                    D("12345678901234567890.0123456789"),
                    D(1),
                ],
                pa.decimal128(38, 10),
            ),  # fmt: skip
            "s": pa.array(["", "a ", " a", "é", "日本", None, "ß", "A", "2020-01-01", "3.5"]),
            "dt": pa.array(
                [
                    dt.date(1970, 1, 1),
                    dt.date(1, 1, 1),
                    dt.date(9999, 12, 31),
                    dt.date(2020, 2, 29),
                    dt.date(1900, 3, 1),
                    None,
                    dt.date(2024, 12, 31),
                    dt.date(1582, 10, 10),
                    dt.date(2000, 1, 1),
                    dt.date(1969, 12, 31),
                ],
            ),  # fmt: skip
            "f": pa.array([0.0, -0.0, float("nan"), float("inf"), float("-inf"), None, 1.5, -2.5, 1e308, 0.1]),
            "bo": pa.array([True, False, None, True, False, None, True, False, True, False]),
            "ts": pa.array(
                [
                    dt.datetime(1970, 1, 1, tzinfo=UTC),
                    dt.datetime(2020, 3, 8, 10, 30, tzinfo=UTC),
                    None,
                    dt.datetime(1900, 1, 1, tzinfo=UTC),
                    dt.datetime(2020, 11, 1, 9, 0, 0, 1, tzinfo=UTC),
                    dt.datetime(2024, 2, 29, 23, 59, 59, tzinfo=UTC),
                    dt.datetime(1969, 12, 31, 23, 0, tzinfo=UTC),
                    dt.datetime(2000, 1, 1, 8, tzinfo=UTC),
                    dt.datetime(1582, 10, 15, tzinfo=UTC),
                    dt.datetime(2038, 1, 19, 3, 14, 8, tzinfo=UTC),
                ],
                pa.timestamp("us", tz="UTC"),
            ),  # fmt: skip
            "tsn": pa.array(
                [
                    dt.datetime(1970, 1, 1),
                    dt.datetime(2020, 3, 8, 2, 30),
                    None,
                    dt.datetime(1900, 1, 1),
                    dt.datetime(2020, 11, 1, 1, 30),
                    dt.datetime(2024, 2, 29, 23, 59, 59),
                    dt.datetime(1969, 12, 31),
                    dt.datetime(2000, 1, 1),
                    dt.datetime(1582, 10, 15),
                    dt.datetime(2038, 1, 19, 3, 14, 8),
                ],
                pa.timestamp("us"),
            ),  # fmt: skip
        }
    )


# ---------------------------------------------------------------- the grammar

INT_LITERALS = ["0", "1", "-1", "3", "-7", "2", "100", "2147483647", "-2147483648", "2147483648",
                "9223372036854775807", "12345678901234567890"]  # fmt: skip
DEC_LITERALS = ["3.5", "-0.5", "0.000001", "1.00", "-7.25", "2.5", "99999999999999999999.5",
                "12345678901234567890123456789.123456789", "0.0", "-3.5"]  # fmt: skip
STR_LITERALS = ["''", "'a '", "' a'", "'é'", "'日本'", "'ß'", "'A'", "'2020-01-01'", "'3.5'", "' 7 '", "'1995-1-1'"]
LIKE_PATTERNS = ["'%'", "''", "'a%'", "'%a '", "'%日%'", "'_'", "'%_%'", "'ß'", "'A%'", "'% a'", "'%2020%01%'"]
DATE_LITERALS = ["DATE '2020-01-01'", "DATE '1582-10-10'", "DATE '2020-1-1'", "DATE '0001-01-01'",
                 "DATE '9999-12-31'"]  # fmt: skip
DEC_TYPES = ["DECIMAL(38,10)", "DECIMAL(18,6)", "DECIMAL(10,0)", "DECIMAL(5,2)", "DECIMAL(38,0)", "DECIMAL(38,37)",
             "DECIMAL(12,2)", "DECIMAL(20,0)", "DECIMAL(3,1)", "DECIMAL(29,6)"]  # fmt: skip
INT_TYPES = ["TINYINT", "SMALLINT", "INT", "BIGINT"]
CATEGORIES = ["int", "small", "dec", "str", "date", "bool", "dbl", "ts", "tsn"]
CORE = ["int", "dec", "str", "date", "bool"]


@dataclass
class Gen:
    """A typed random expression generator; ``tags`` collects the constructs of the last expression."""

    rng: random.Random
    tags: set[str] = field(default_factory=set)
    core: bool = False  # only the constructs the check may accept (so that they are deeply exercised)

    def pick(self, xs: list[str], tag: str) -> str:
        self.tags.add(tag)
        return self.rng.choice(xs)

    def expr(self, cat: str, depth: int) -> str:
        if self.core and cat not in CORE:
            cat = self.rng.choice(CORE)
        if depth <= 0 or self.rng.random() < 0.25:
            return self.leaf(cat)
        if self.core and cat in ("int", "dec") and self.rng.random() < 0.7:
            a, b = self.rng.choice([(cat, cat), (cat, "int"), ("int", cat), ("dec", "int")])
            return self.arith(["+", "-", "*"], depth - 1, a, b)
        return getattr(self, f"node_{cat}")(depth - 1)

    def leaf(self, cat: str) -> str:
        r = self.rng.random()
        if r < 0.06:
            self.tags.add("NULL")
            return "NULL"
        columns = {"int": ["i32", "i64"], "small": ["i8", "i16"], "dec": ["d12", "d18", "d38"], "str": ["s"],
                   "date": ["dt"], "bool": ["bo"], "dbl": ["f"], "ts": ["ts"], "tsn": ["tsn"]}  # fmt: skip
        literals = {"int": INT_LITERALS, "small": ["CAST(1 AS TINYINT)", "CAST(-7 AS SMALLINT)"],
                    "dec": DEC_LITERALS, "str": STR_LITERALS, "date": DATE_LITERALS, "bool": ["true", "false"],
                    "dbl": ["1.5D", "-0.0D", "CAST('NaN' AS DOUBLE)", "1e308", "0.1D"],
                    "ts": ["TIMESTAMP '2020-03-08 02:30:00'", "TIMESTAMP '1970-01-01 00:00:00'"],
                    "tsn": ["TIMESTAMP_NTZ '2020-03-08 02:30:00'"]}  # fmt: skip
        if r < 0.6:
            return self.pick(columns[cat], f"column {cat}")
        return self.pick(literals[cat], f"literal {cat}")

    def num(self, depth: int) -> str:
        return self.expr(self.rng.choice(["int", "int", "dec", "dec", "small"]), depth)

    def arith(self, ops: list[str], depth: int, a: str, b: str) -> str:
        op = self.pick(ops, "")
        self.tags.add(f"{op.strip()} {a}/{b}")
        return f"({self.expr(a, depth)} {op} {self.expr(b, depth)})"

    def cast(self, depth: int, sources: list[str], targets: list[str], cat: str) -> str:
        src = self.rng.choice(sources)
        target = self.rng.choice(targets)
        inner = self.expr(src, depth) if self.rng.random() < 0.6 else self.leaf(src)
        kind = "literal" if not inner.startswith(("i", "d", "s", "f", "b", "t", "(")) or "'" in inner else "expr"
        self.tags.add(f"CAST {src}->{cat} ({kind})")
        return f"CAST({inner} AS {target})"

    def case_when(self, cat: str, depth: int) -> str:
        """``CASE WHEN b THEN x [WHEN b THEN x] [ELSE x] END`` of category ``cat`` (an integer literal now and then
        among decimals, as TPC-H's ``ELSE 0``)."""
        self.tags.add(f"CASE {cat}")
        parts = []
        for _ in range(self.rng.randint(1, 2)):
            value = "0" if cat == "dec" and self.rng.random() < 0.3 else self.expr(cat, depth)
            parts.append(f"WHEN {self.expr('bool', depth)} THEN {value}")
        if self.rng.random() < 0.7:
            parts.append(f"ELSE {'0' if cat == 'dec' and self.rng.random() < 0.5 else self.expr(cat, depth)}")
        return f"(CASE {' '.join(parts)} END)"

    def node_int(self, depth: int) -> str:
        k = self.rng.randrange(10)
        if k == 8:
            return self.case_when("int", depth)
        if k == 9:
            self.tags.add("extract()")
            return f"extract(YEAR FROM {self.expr('date', depth)})"
        if k < 3:
            a, b = self.rng.choice([("int", "int"), ("int", "small"), ("small", "small")])
            return self.arith(["+", "-", "*", "div", "%"], depth, a, b)
        if k == 3:
            self.tags.add("negate int")
            return f"(- {self.expr('int', depth)})"
        if k == 4:
            f = self.pick(["length", "abs", "year", "pmod"], "int function")
            self.tags.add(f"{f}()")
            if f == "length":
                return f"length({self.expr('str', depth)})"
            if f == "year":
                return f"year({self.expr('date', depth)})"
            if f == "pmod":
                return f"pmod({self.expr('int', depth)}, {self.expr('int', depth)})"
            return f"abs({self.expr('int', depth)})"
        return self.cast(depth, ["int", "small", "dec", "str", "dbl", "bool"], ["INT", "BIGINT"], "int")

    def node_small(self, depth: int) -> str:
        return self.cast(depth, ["int", "small", "dec", "str", "dbl"], ["TINYINT", "SMALLINT"], "small")

    def node_dec(self, depth: int) -> str:
        k = self.rng.randrange(10)
        if k == 9:
            return self.case_when("dec", depth)
        if k < 4:
            a, b = self.rng.choice([("dec", "dec"), ("dec", "int"), ("int", "dec"), ("dec", "small")])
            return self.arith(["+", "-", "*", "/", "%"], depth, a, b)
        if k == 4:
            self.tags.add("negate dec")
            return f"(- {self.expr('dec', depth)})"
        if k == 5:
            f = self.pick(["ROUND", "FLOOR", "CEIL", "abs"], "dec function")
            self.tags.add(f"{f}()")
            if f == "ROUND":
                return f"ROUND({self.expr('dec', depth)}, {self.rng.choice([0, 1, 2, -1])})"
            return f"{f}({self.expr('dec', depth)})"
        return self.cast(depth, ["int", "dec", "str", "dbl", "small"], DEC_TYPES, "dec")

    def node_str(self, depth: int) -> str:
        k = self.rng.randrange(5)
        if k == 4:
            return self.case_when("str", depth)
        if k < 2:
            f = self.pick(["upper", "lower", "trim", "substr", "concat"], "string function")
            self.tags.add(f"{f}()")
            if f == "substr":
                return f"substr({self.expr('str', depth)}, {self.rng.choice([1, 2, -1, 0])}, 2)"
            if f == "concat":
                return f"concat({self.expr('str', depth)}, {self.expr('str', depth)})"
            return f"{f}({self.expr('str', depth)})"
        return self.cast(depth, CATEGORIES, ["STRING"], "str")

    def node_date(self, depth: int) -> str:
        k = self.rng.randrange(4)
        if k == 0:
            self.tags.add("date + INTERVAL")
            return f"({self.node_date(depth - 1) if depth > 0 else 'dt'} + INTERVAL '1' YEAR)"
        if k == 1:
            self.tags.add("date_add()")
            return f"date_add({self.expr('date', depth)}, {self.rng.choice(['1', '-1', '365', 'CAST(i32 AS INT)'])})"
        return self.cast(depth, ["str", "ts", "tsn", "date"], ["DATE"], "date")

    def node_bool(self, depth: int) -> str:
        k = self.rng.randrange(12)
        if k == 11:
            cat = self.rng.choice(["int", "dec", "str", "date", "num", "small"])
            self.tags.add(f"BETWEEN {cat}")
            a, b, c = (self.num(depth) if cat == "num" else self.expr(cat, depth) for _ in range(3))
            return f"({a} {self.rng.choice(['', 'NOT '])}BETWEEN {b} AND {c})"
        if k == 10:
            op = self.pick(["LIKE", "NOT LIKE"], "")
            self.tags.add(op)
            return f"({self.expr('str', depth)} {op} {self.pick(LIKE_PATTERNS, '')})"
        if k < 4:
            cat = self.rng.choice(["int", "dec", "str", "date", "bool", "dbl", "ts", "tsn", "num", "small"])
            op = self.rng.choice(["=", "<", "<=", ">", ">=", "<>", "<=>"])
            self.tags.add(f"{op} {cat}")
            a = self.num(depth) if cat == "num" else self.expr(cat, depth)
            b = self.num(depth) if cat == "num" else self.expr(cat, depth)
            return f"({a} {op} {b})"
        if k < 6:
            op = self.pick(["AND", "OR"], "")
            self.tags.add(op)
            return f"({self.expr('bool', depth)} {op} {self.expr('bool', depth)})"
        if k == 6:
            self.tags.add("NOT")
            return f"(NOT {self.expr('bool', depth)})"
        if k == 7:
            cat = self.rng.choice(CATEGORIES)
            op = self.pick(["IS NULL", "IS NOT NULL"], "")
            self.tags.add(f"{op} {cat}")
            return f"({self.expr(cat, depth)} {op})"
        if k == 8:
            cat = self.rng.choice(["int", "dec", "str", "date", "small"])
            self.tags.add(f"IN {cat}")
            items = ", ".join(self.leaf(cat) for _ in range(self.rng.randint(1, 4)))
            return f"({self.expr(cat, depth)} IN ({items}))"
        self.tags.add("isnan()")
        return f"isnan({self.expr('dbl', depth)})"

    def node_dbl(self, depth: int) -> str:
        if self.rng.random() < 0.5:
            a, b = self.rng.choice([("dbl", "dbl"), ("dbl", "int"), ("dec", "dbl")])
            return self.arith(["+", "-", "*", "/"], depth, a, b)
        return self.cast(depth, ["int", "dec", "str", "dbl"], ["DOUBLE"], "dbl")

    def node_ts(self, depth: int) -> str:
        if self.rng.random() < 0.3:
            self.tags.add("timestamp + INTERVAL")
            return f"({self.node_ts(depth - 1) if depth > 0 else 'ts'} + INTERVAL '1' HOUR)"
        return self.cast(depth, ["date", "str", "tsn", "ts"], ["TIMESTAMP"], "ts")

    def node_tsn(self, depth: int) -> str:
        return self.cast(depth, ["date", "str", "ts", "tsn"], ["TIMESTAMP_NTZ"], "tsn")

    def case(self) -> tuple[str, set[str]]:
        self.tags = set()
        self.core = self.rng.random() < 0.5
        e = self.expr(self.rng.choice(CORE if self.core else CATEGORIES), self.rng.randint(1, 3))
        return e, {t for t in self.tags if t}


# ---------------------------------------------------------------- evaluating by both engines


@dataclass
class Outcome:
    """What one engine gave for one expression: an Arrow column, or an error."""

    column: pa.ChunkedArray | None = None
    error: str | None = None


def _select(exprs: list[str]) -> str:
    return "SELECT rid, " + ", ".join(f"{e} AS c{i}" for i, e in enumerate(exprs)) + " FROM t"


def _bisect(exprs: list[str], run: Any) -> list[Outcome]:
    """``run(exprs)`` (a list of outcomes), splitting a failing batch until each failure is one expression's."""
    try:
        return run(exprs)
    except Exception as exc:  # noqa: BLE001 (one expression's error fails its batch)
        if len(exprs) == 1:
            return [Outcome(error=str(exc).splitlines()[0][:200])]
        mid = len(exprs) // 2
        return _bisect(exprs[:mid], run) + _bisect(exprs[mid:], run)


def _verdicts(spark: Any, exprs: list[str]) -> list[tuple[str | None, pa.Field | None]]:
    """Per expression: the check's reason to refuse (None: accepted) and Spark's Arrow field; an expression Spark
    cannot analyse gives ``("invalid", None)``."""
    from pyspark.sql.pandas.types import to_arrow_type

    from mvsink.plan.read import tree_of_dataframe

    def run(batch: list[str]) -> list[tuple[str | None, pa.Field | None]]:
        df = spark.sql(_select(batch))
        tree = tree_of_dataframe(df)
        assert tree.name == "Project" and len(tree.expressions) == len(batch) + 1, tree.name
        out = []
        for e, f in zip(tree.expressions[1:], df.schema.fields[1:], strict=True):
            why = unsupported(PlanNode("Project", tree.children, (e,)))
            out.append((why, pa.field(f.name, to_arrow_type(f.dataType, timezone=ZONE))))
        return out

    def safe(batch: list[str]) -> list[tuple[str | None, pa.Field | None]]:
        try:
            return run(batch)
        except Exception:  # noqa: BLE001
            if len(batch) == 1:
                return [("invalid", None)]
            mid = len(batch) // 2
            return safe(batch[:mid]) + safe(batch[mid:])

    return safe(exprs)


def _by_spark(spark: Any, exprs: list[str], fields: list[pa.Field]) -> list[Outcome]:
    def run(batch: list[str]) -> list[Outcome]:
        got = spark.sql(_select(batch)).toArrow().sort_by("rid")
        return [Outcome(column=got.column(i + 1)) for i in range(len(batch))]

    outcomes = _bisect(exprs, run)
    for o, f in zip(outcomes, fields, strict=True):  # Spark's own Arrow types, exactly (view types aside)
        if o.column is not None:
            o.column = o.column.cast(f.type)
    return outcomes


def _by_duckdb(table: pa.Table, exprs: list[str]) -> list[Outcome]:
    import duckdb

    def run(batch: list[str]) -> list[Outcome]:
        sql = _duckdb_sql(_select(batch))
        con = duckdb.connect()
        try:
            con.register("t", table)
            got = con.sql(sql).to_arrow_table().sort_by("rid")
        finally:
            con.close()
        return [Outcome(column=got.column(i + 1)) for i in range(len(batch))]

    out: list[Outcome] = []
    for e in exprs:  # (an untranslatable expression is refused alone)
        try:
            _duckdb_sql(_select([e]))
        except Untranslatable as exc:
            out.append(Outcome(error=f"untranslatable: {exc}"))
        else:
            out.append(Outcome())
    ok = [e for e, o in zip(exprs, out, strict=True) if o.error is None]
    got = iter(_bisect(ok, run) if ok else [])
    return [o if o.error else next(got) for o in out]


def _key(v: Any) -> str:
    return repr(v)  # (Decimal('1.50') != Decimal('1.5'), -0.0 != 0.0, nan == nan, by their reprs)


@dataclass
class Figures:
    cases: int = 0
    invalid: int = 0
    accepted: int = 0
    refused: int = 0
    untranslatable: int = 0
    duckdb_errors: int = 0
    both_errors: int = 0
    equal: int = 0
    differences: list[str] = field(default_factory=list)
    by_construct: Counter[str] = field(default_factory=Counter)
    accepted_by_construct: Counter[str] = field(default_factory=Counter)
    refusals: Counter[str] = field(default_factory=Counter)

    def report(self) -> str:
        lines = [
            f"cases {self.cases}: invalid in Spark {self.invalid}, accepted {self.accepted}, refused {self.refused}; "
            f"of the accepted: equal {self.equal}, DuckDB-error fallbacks {self.duckdb_errors} (untranslatable "
            f"{self.untranslatable}), errors in both {self.both_errors}, differences {len(self.differences)}"
        ]
        for c in sorted(self.by_construct):
            lines.append(f"  {c:32} {self.accepted_by_construct[c]:6} accepted of {self.by_construct[c]:6}")
        lines.append("refusals (first reason):")
        lines += [f"  {n:6} {why}" for why, n in self.refusals.most_common(25)]
        return "\n".join(lines)


def differential(spark: Any, table_path: str, cases: list[tuple[str, set[str]]]) -> Figures:
    """Every case judged, and every accepted one evaluated by both engines and compared."""
    fig = Figures(cases=len(cases))
    schema = spark.table("t").schema
    duck_table = pq.read_table(table_path).cast(duckdb_schema(schema, None, ZONE))
    for start in range(0, len(cases), BATCH):
        batch = cases[start : start + BATCH]
        verdicts = _verdicts(spark, [e for e, _ in batch])
        accepted: list[tuple[str, pa.Field]] = []
        for (e, tags), (why, f) in zip(batch, verdicts, strict=True):
            if why == "invalid":
                fig.invalid += 1
                continue
            fig.by_construct.update(tags)
            if why is None:
                assert f is not None
                fig.accepted += 1
                fig.accepted_by_construct.update(tags)
                accepted.append((e, f))
            else:
                fig.refused += 1
                fig.refusals[why.split(" (")[0][:70]] += 1
        if not accepted:
            continue
        exprs, fields = [e for e, _ in accepted], [f for _, f in accepted]
        ducks = _by_duckdb(duck_table, exprs)
        # Spark evaluates apart what DuckDB fails on (Spark likely fails too: its batch would be split, job by job)
        groups = [[i for i, d in enumerate(ducks) if (d.error is None) is ok] for ok in (True, False)]
        sparks: dict[int, Outcome] = {}
        for group, alone in zip(groups, (False, True), strict=True):
            for part in [[i] for i in group] if alone else [group] if group else []:
                got = _by_spark(spark, [exprs[i] for i in part], [fields[i] for i in part])
                sparks.update(zip(part, got, strict=True))
        for i, (e, f, d) in enumerate(zip(exprs, fields, ducks, strict=True)):
            _compare(fig, e, f, sparks[i], d)
    return fig


def _compare(fig: Figures, e: str, f: pa.Field, s: Outcome, d: Outcome) -> None:
    if d.error is not None and d.error.startswith("untranslatable"):
        fig.untranslatable += 1
    if s.error is not None:
        if d.error is None:
            fig.differences.append(f"{e}: Spark fails ({s.error}), DuckDB gives {d.column}")
        else:
            fig.both_errors += 1
        return
    if d.error is not None:
        fig.duckdb_errors += 1
        return
    assert s.column is not None and d.column is not None
    typed = as_spark_types(pa.table([d.column], names=[f.name]), pa.schema([f]))
    if isinstance(typed, str):
        fig.differences.append(f"{e}: {typed}")
        return
    want, got = s.column.to_pylist(), typed.column(0).to_pylist()
    rows = [i for i, (a, b) in enumerate(zip(want, got, strict=True)) if _key(a) != _key(b)]
    if rows:
        fig.differences.append(f"{e}: rows {rows}: Spark {[want[i] for i in rows]}, DuckDB {[got[i] for i in rows]}")
    else:
        fig.equal += 1


@pytest.fixture(scope="module")
def awkward(spark, tmp_path_factory):
    """Table ``t`` (the awkward rows, one Parquet file) in a session whose time zone is not UTC."""
    path = str(tmp_path_factory.mktemp("translation") / "t.parquet")
    pq.write_table(awkward_rows(), path)
    logging.getLogger("SQLQueryContextLogger").setLevel(logging.CRITICAL)  # (Spark's expected errors)
    spark.sparkContext.setLogLevel("OFF")
    before = {k: spark.conf.get(k) for k in ("spark.sql.session.timeZone",)}
    spark.conf.set("spark.sql.session.timeZone", ZONE)
    spark.conf.set("spark.sql.parquet.datetimeRebaseModeInRead", "CORRECTED")
    spark.read.parquet(path).createOrReplaceTempView("t")
    yield path
    spark.catalog.dropTempView("t")
    spark.sparkContext.setLogLevel("WARN")
    for k, v in before.items():
        spark.conf.set(k, v)


def test_generated_expressions_accepted_are_evaluated_by_duckdb_as_by_spark(spark, awkward, request):
    seed = request.config.getoption("--translator-seed")
    n = request.config.getoption("--translator-cases")
    gen = Gen(random.Random(seed))
    cases = [gen.case() for _ in range(n)]
    began = time.monotonic()
    fig = differential(spark, awkward, cases)
    print(f"\nseed {seed}, {time.monotonic() - began:.1f} s\n{fig.report()}")
    assert not fig.differences, "\n".join(fig.differences[:30])
    assert fig.cases - fig.invalid >= 0.8 * n and fig.accepted >= 0.1 * n, fig.report()


@pytest.mark.parametrize(
    ("expr", "accepted"),
    [
        ("i32 >= CAST(3.5 AS INT)", False),  # Spark truncates to 3, DuckDB rounds to 4
        ("CAST(3.5 AS INT)", False),
        ("CAST(3.0 AS INT)", True),  # (proven by the literal's value)
        ("CAST(-3.5 AS BIGINT)", False),
        ("d18 > 5", True),
        ("CAST('2020-01-01' AS DATE)", True),
        ("dt >= '1995-1-1'", False),  # (a date string but 'YYYY-MM-DD': the parsers differ)
        ("d18 * i32", True),  # DuckDB's DECIMAL(18,6) x INT overflowed in its DECIMAL(18)
        ("d18 * i64", False),  # Spark: 39 digits
        ("d18 * i32 * 2", True),
        ("d38 * i32", False),  # Spark: 49 digits, it rounds
        ("i32 + 1", True),
        ("i8 + 1", False),  # DuckDB types 1 as TINYINT there
        ("d12 * d12 * d12", True),
        ("d12 * d12 * d12 * d12", False),
        ("ts IS NULL", False),
        ("12345678901234567890 < i64", None),  # Spark's analyser: false, even where i64 is NULL (untranslatable)
        ("12345678901234567890123456789.123456789 >= i64", None),
        ("i32 = 3.5", False),
        ("i64 < 7", True),
        ("d18 IN (1, 2.5)", True),
        ("extract(YEAR FROM dt)", True),
        ("year(dt) * 1000000", False),  # DuckDB's year is a BIGINT: no overflow where Spark's INT fails
        ("CASE WHEN i32 > 1 THEN d12 * d12 ELSE 0 END", True),
        ("CASE WHEN i32 > 1 THEN d12 ELSE d18 END", False),  # DuckDB: DECIMAL(38,2) and (38,6) make a DOUBLE
        ("CASE WHEN bo THEN s END", True),
        ("s LIKE '%a%'", True),
        ("s NOT LIKE 'a_'", False),  # (what one character is differs)
        ("s LIKE 'a!%' ESCAPE '!'", None),  # (the plan does not carry the escape)
        ("dt BETWEEN DATE '1995-01-01' AND DATE '1996-12-31'", True),
        ("d12 BETWEEN 0.05 AND 0.07", True),
        ("i32 NOT BETWEEN 1 AND d18", True),
        ("i8 BETWEEN 1 AND 2", True),
        ("((i32 * 0) * i32) + 2", False),  # Spark: (i32 * i32) * 0, an overflow (seed 11 found it)
        ("(i32 + 1) + i32", False),
        ("i32 * i32 * 2", False),
        ("(i32 * 2) + i32", True),
        ("extract(YEAR FROM CAST(CAST(NULL AS DATE) AS DATE))", False),  # DuckDB: a DOUBLE
        # an uncorrelated scalar MIN/MAX of a column (TPC-H Q15's body over its intermediate table)
        ("d18 = (SELECT max(d18) FROM t)", True),
        ("d38 = (SELECT max(d38) FROM t)", True),
        ("i32 < (SELECT min(i32) FROM t WHERE i32 > 0)", True),
        ("dt = (SELECT max(dt) FROM t WHERE i8 > 100)", True),  # (over no rows: NULL in both)
        ("s = (SELECT max(s) FROM t)", False),  # (string order: not proven equal)
        ("d18 > (SELECT sum(d18) FROM t)", False),  # (a SUM's type and overflow differ)
        # two decimals beyond 38 digits: Spark compares them at DECIMAL(38, s) keeping their integer digits, rounding
        # the other's scale (TPC-H Q11's HAVING: its DECIMAL(36,2) sum against a DECIMAL(38,6) at DECIMAL(38,4)),
        # where DuckDB compares at the greater scale: refused
        ("d38 > d18 * d18", False),  # (Spark: d18 * d18, a DECIMAL(37,12), rounded to DECIMAL(38,10))
        ("d12 * d12 * d12 = d38", False),  # (Spark: d38 rounded to DECIMAL(38,6))
        ("CAST(d12 AS DECIMAL(36,2)) > d12 * d12 * d12", False),  # (Q11's: Spark rounds the product to (38,4))
        ("i32 = (SELECT max(i32) FROM t t2 WHERE t2.rid = t.rid)", True),  # correlated: one aggregate, no GROUP BY
        ("i32 = (SELECT max(i32) FILTER (WHERE i8 > 0) FROM t)", False),
    ],
)
def test_targeted_cases(spark, awkward, expr, accepted):
    """``accepted``: True (and evaluated equal, or failing in both), False (refused), None (accepted by the plan's
    check, refused by the translation: a fallback)."""
    fig = differential(spark, awkward, [(expr, {"targeted"})])
    assert (fig.accepted, fig.refused) == ((0, 1) if accepted is False else (1, 0)), fig.report()
    assert fig.untranslatable == (1 if accepted is None else 0), fig.report()
    assert not fig.differences, fig.differences
    if accepted:  # (no DuckDB error where Spark has a value: d18 * i32 does not overflow there)
        assert fig.equal + fig.both_errors == 1, fig.report()
