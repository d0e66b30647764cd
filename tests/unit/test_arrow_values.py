"""Arrow arrays from Python values without pyarrow's pandas shim (core/arrowvalues.py): each type's array equal to
``pa.array``'s, values that do not fit refused as pyarrow refuses them, and no pandas imported."""

from __future__ import annotations

import datetime as dt
import random
import subprocess
import sys
from decimal import Decimal

import pyarrow as pa
import pytest

from mvsink.core.arrowvalues import (
    array_of,
    empty_table,
    int64_array,
    repeat_int64,
    scalar_of,
    table_from_rows,
)

pytestmark = pytest.mark.unit

UTC = dt.UTC


def _values(t: pa.DataType, rng: random.Random) -> list:
    """Random values of ``t``, extremes and nulls among them."""
    if pa.types.is_integer(t):
        lo, hi = (
            (-(2 ** (t.bit_width - 1)), 2 ** (t.bit_width - 1) - 1)
            if pa.types.is_signed_integer(t)
            else (0, 2**t.bit_width - 1)
        )
        pool = [lo, hi, 0] + [rng.randint(lo, hi) for _ in range(20)]
    elif pa.types.is_floating(t):
        pool = [0.0, -0.0, 1.5, float("inf"), -float("inf"), 1e300 if pa.types.is_float64(t) else 3.0e38]
        pool += [rng.uniform(-1e6, 1e6) for _ in range(20)]
    elif pa.types.is_boolean(t):
        pool = [True, False] * 5
    elif pa.types.is_string(t) or pa.types.is_large_string(t):
        pool = ["", "a", "ünïcödé ✓", "x" * 300] + [str(rng.random()) for _ in range(10)]
    elif pa.types.is_binary(t) or pa.types.is_large_binary(t):
        pool = [b"", b"\x00\xff", bytes(range(256))]
    elif pa.types.is_decimal(t):
        top = 10**t.precision - 1
        pool = [Decimal(f"{top}E-{t.scale}"), Decimal(f"-{top}E-{t.scale}"), Decimal(0), Decimal("1"), 7]
        pool += [Decimal(f"{rng.randint(-top, top)}E-{t.scale}") for _ in range(20)]
        pool += [Decimal("1.5")] if t.scale else []  # fewer digits than the scale
    elif pa.types.is_date32(t):
        pool = [dt.date(1970, 1, 1), dt.date(1, 1, 1), dt.date(9999, 12, 31), dt.date(1969, 12, 31)]
        pool += [dt.date(1970, 1, 1) + dt.timedelta(days=rng.randint(-300_000, 300_000)) for _ in range(10)]
    elif pa.types.is_timestamp(t):
        tz = UTC if t.tz else None
        pool = [dt.datetime(1970, 1, 1, tzinfo=tz), dt.datetime(1969, 12, 31, 23, 59, 59, 999_999, tzinfo=tz)]
        pool += [dt.datetime(2026, 11, 29, 1, 2, 3, 456_789, tzinfo=tz), dt.datetime(1, 1, 1, tzinfo=tz)]
        if tz:
            pool.append(dt.datetime(2026, 6, 1, 12, tzinfo=dt.timezone(dt.timedelta(hours=5, minutes=30))))
    else:
        raise AssertionError(t)
    out = [rng.choice(pool) for _ in range(40)] + pool
    for i in rng.sample(range(len(out)), 5):
        out[i] = None
    return out


TYPES = [
    pa.int8(),
    pa.int16(),
    pa.int32(),
    pa.int64(),
    pa.uint8(),
    pa.uint64(),
    pa.float32(),
    pa.float64(),
    pa.bool_(),
    pa.string(),
    pa.large_string(),
    pa.binary(),
    pa.decimal128(38, 18),
    pa.decimal128(10, 2),
    pa.decimal128(5, 0),
    pa.date32(),
    pa.timestamp("us", tz="UTC"),
    pa.timestamp("us"),
]


@pytest.mark.parametrize("t", TYPES, ids=str)
def test_each_type_is_what_pa_array_makes(t):
    rng = random.Random(str(t))
    values = _values(t, rng)
    got = array_of(values, t)
    got.validate(full=True)
    assert got.type == t
    assert got.equals(pa.array(values, type=t))
    assert got.null_count == 5
    no_nulls = [v for v in values if v is not None]
    assert array_of(no_nulls, t).equals(pa.array(no_nulls, type=t))
    assert array_of([], t).equals(pa.array([], type=t))
    assert scalar_of(no_nulls[0], t).equals(pa.scalar(no_nulls[0], type=t))
    assert scalar_of(None, t).equals(pa.scalar(None, type=t))


@pytest.mark.parametrize(
    ("values", "t"),
    [
        ([128], pa.int8()),
        ([-1], pa.uint8()),
        ([2**63], pa.int64()),
        ([Decimal("1.234")], pa.decimal128(10, 2)),
        ([Decimal("123456")], pa.decimal128(5, 0)),
    ],
)
def test_a_value_that_does_not_fit_is_refused_as_pyarrow_refuses_it(values, t):
    with pytest.raises((pa.ArrowInvalid, OverflowError)):
        pa.array(values, type=t)
    with pytest.raises(pa.ArrowInvalid):
        array_of(values, t)


@pytest.mark.parametrize(
    ("values", "t"), [(["1"], pa.int64()), ([1.5], pa.int64()), ([1], pa.bool_()), (["x"], pa.decimal128(5, 2))]
)
def test_a_value_of_another_type_is_refused(values, t):
    with pytest.raises((pa.ArrowInvalid, pa.ArrowTypeError)):
        array_of(values, t)


def test_other_types_go_through_pyarrow():
    t = pa.list_(pa.int64())
    assert array_of([[1, 2], None], t).equals(pa.array([[1, 2], None], type=t))


def test_tables_and_int64_columns():
    schema = pa.schema([("k", pa.string()), ("n", pa.int64()), ("s", pa.decimal128(22, 2))])
    rows = [{"k": "a", "n": 1, "s": Decimal("1.50")}, {"k": None, "n": 2}]
    got = table_from_rows(rows, schema)
    assert got.equals(pa.Table.from_pylist(rows, schema=schema))
    assert empty_table(schema).equals(schema.empty_table())
    assert repeat_int64(-3, 4).equals(pa.array([-3] * 4, pa.int64()))
    assert repeat_int64(5, 0).equals(pa.array([], pa.int64()))
    assert int64_array(range(5)).equals(pa.array(list(range(5)), pa.int64()))


def test_no_pandas_is_imported():
    code = (
        "import sys, datetime as dt, decimal, pyarrow as pa\n"
        "from mvsink.core.arrowvalues import array_of, table_from_rows, empty_table, repeat_int64, scalar_of\n"
        "s = pa.schema([('k', pa.string()), ('d', pa.decimal128(10, 2)), ('t', pa.timestamp('us', tz='UTC')),"
        " ('b', pa.bool_()), ('x', pa.float64()), ('day', pa.date32())])\n"
        "table_from_rows([{'k': 'a', 'd': decimal.Decimal('1.5'), 't': dt.datetime(2026, 1, 1), 'b': True,"
        " 'x': 1.0, 'day': dt.date(2026, 1, 1)}], s)\n"
        "empty_table(s); repeat_int64(1, 3); scalar_of(3, pa.int32())\n"
        "print('pandas' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
