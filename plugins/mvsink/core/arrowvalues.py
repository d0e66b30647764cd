"""Arrow arrays and tables from Python values without pyarrow's pandas shim.

pyarrow asks whether pandas is installed, importing it, whenever it converts Python values (``pa.array(list)``,
``pa.scalar``, ``Table.from_pylist``, even ``Schema.empty_table()``): 0.2 s of a small refresh's process that never
uses pandas. These build the same arrays from buffers for the flat types a view's rows have (integers, floating
point, booleans, strings and binaries, decimals, dates, microsecond timestamps, nulls); any other type goes through
``pa.array`` as before. ``tests/unit/test_arrow_values.py`` holds each to ``pa.array``'s result.
"""

from __future__ import annotations

import array
import datetime as dt
import decimal
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pyarrow as pa

_EPOCH_DAY = dt.date(1970, 1, 1)
_EPOCH = dt.datetime(1970, 1, 1)
_EPOCH_UTC = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
_MICROSECOND = dt.timedelta(microseconds=1)


def empty_table(schema: pa.Schema) -> pa.Table:
    """A table of no rows with ``schema`` (``schema.empty_table()``)."""
    import pyarrow as pa

    return pa.Table.from_batches([], schema=schema)


def repeat_int64(value: int, n: int) -> pa.Array:
    """``n`` times ``value`` as int64 (``pa.array([value] * n, pa.int64())``)."""
    import pyarrow as pa

    return pa.Array.from_buffers(pa.int64(), n, [None, pa.py_buffer(array.array("q", [value]) * n)])


def int64_array(values: Iterable[int]) -> pa.Array:
    """``values`` (no None) as int64 (``pa.array(list(values), pa.int64())``)."""
    import pyarrow as pa

    data = array.array("q", values)
    return pa.Array.from_buffers(pa.int64(), len(data), [None, pa.py_buffer(data)])


def table_from_rows(rows: Sequence[Mapping[str, Any]], schema: pa.Schema) -> pa.Table:
    """``rows`` (dicts keyed by ``schema``'s names; a missing key is null) as a table of ``schema``
    (``pa.Table.from_pylist(rows, schema=schema)``)."""
    import pyarrow as pa

    columns = [array_of([r.get(f.name) for r in rows], f.type) for f in schema]
    return pa.Table.from_arrays(columns, schema=schema)


def scalar_of(value: Any, type: pa.DataType) -> pa.Scalar:
    """``value`` as a scalar of ``type`` (``pa.scalar(value, type)``)."""
    return array_of([value], type)[0]


_INT_CODES = {8: "b", 16: "h", 32: "i", 64: "q"}
_UINT_CODES = {8: "B", 16: "H", 32: "I", 64: "Q"}


def array_of(values: Sequence[Any], type: pa.DataType) -> pa.Array:
    """``values`` (None for null) as an array of ``type``, as ``pa.array(values, type)`` makes it; raises
    ``pa.ArrowInvalid`` where a value does not fit the type (an integer out of range, a decimal with more digits)."""
    import pyarrow as pa
    import pyarrow.types as pt

    n = len(values)
    validity, nulls = _validity(values)
    try:
        if pt.is_null(type):
            if nulls != n:
                raise pa.ArrowInvalid("a value in a null column")
            return pa.nulls(n)
        if pt.is_integer(type):
            codes = _INT_CODES if pt.is_signed_integer(type) else _UINT_CODES
            data = array.array(codes[type.bit_width], (_int(v) if v is not None else 0 for v in values))
            return pa.Array.from_buffers(type, n, [validity, pa.py_buffer(data)], null_count=nulls)
        if pt.is_float64(type) or pt.is_float32(type):
            code = "d" if pt.is_float64(type) else "f"
            floats: array.array[float] = array.array(code, (_float(v) if v is not None else 0.0 for v in values))
            return pa.Array.from_buffers(type, n, [validity, pa.py_buffer(floats)], null_count=nulls)
        if pt.is_boolean(type):
            bits, _ = _validity([True if _bool(v) else None for v in values])
            return pa.Array.from_buffers(type, n, [validity, bits or _ones(n)], null_count=nulls)
        if pt.is_string(type) or pt.is_large_string(type) or pt.is_binary(type) or pt.is_large_binary(type):
            text = pt.is_string(type) or pt.is_large_string(type)
            parts = [b"" if v is None else (v.encode() if text else bytes(v)) for v in values]
            ends = [0]
            for p in parts:
                ends.append(ends[-1] + len(p))
            code = "q" if (pt.is_large_string(type) or pt.is_large_binary(type)) else "i"
            offsets = pa.py_buffer(array.array(code, ends))
            return pa.Array.from_buffers(type, n, [validity, offsets, pa.py_buffer(b"".join(parts))], null_count=nulls)
        if pt.is_decimal128(type):
            body = b"".join(_decimal_bytes(v, type.precision, type.scale) for v in values)
            return pa.Array.from_buffers(type, n, [validity, pa.py_buffer(body)], null_count=nulls)
        if pt.is_date32(type):
            data = array.array("i", ((v - _EPOCH_DAY).days if v is not None else 0 for v in values))
            return pa.Array.from_buffers(type, n, [validity, pa.py_buffer(data)], null_count=nulls)
        if pt.is_timestamp(type) and type.unit == "us":
            data = array.array("q", (_micros(v) if v is not None else 0 for v in values))
            return pa.Array.from_buffers(type, n, [validity, pa.py_buffer(data)], null_count=nulls)
    except OverflowError as exc:
        raise pa.ArrowInvalid(f"a value does not fit {type}: {exc}") from None
    except (TypeError, AttributeError) as exc:
        raise pa.ArrowTypeError(f"a value is not of {type}: {exc}") from None
    return pa.array(values, type=type)  # other types: pyarrow's own conversion


def _validity(values: Sequence[Any]) -> tuple[pa.Buffer | None, int]:
    """The validity bitmap of ``values`` (None where none is null) and the number of nulls."""
    import pyarrow as pa

    n = len(values)
    bits = bytearray((n + 7) // 8)
    nulls = 0
    for i, v in enumerate(values):
        if v is None:
            nulls += 1
        else:
            bits[i >> 3] |= 1 << (i & 7)
    return (None if nulls == 0 else pa.py_buffer(bytes(bits))), nulls


def _ones(n: int) -> pa.Buffer:
    import pyarrow as pa

    return pa.py_buffer(b"\xff" * ((n + 7) // 8))


def _bool(v: Any) -> bool:
    if v is not None and not isinstance(v, bool):
        raise TypeError(f"{v!r} is not a boolean")
    return bool(v)


def _float(v: Any) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise TypeError(f"{v!r} is not a number")
    return float(v)


def _int(v: Any) -> int:
    if isinstance(v, bool) or not isinstance(v, int):
        raise TypeError(f"{v!r} is not an integer")
    return v


def _decimal_bytes(v: Any, precision: int, scale: int) -> bytes:
    if v is None:
        return bytes(16)
    if isinstance(v, int) and not isinstance(v, bool):
        v = decimal.Decimal(v)
    if not isinstance(v, decimal.Decimal) or not v.is_finite():
        raise TypeError(f"{v!r} is not a finite decimal")
    unscaled = v.scaleb(scale, context=decimal.Context(prec=100))
    if unscaled != unscaled.to_integral_value():
        raise OverflowError(f"{v} has more than {scale} digits after the point")
    i = int(unscaled)
    if abs(i) >= 10**precision:
        raise OverflowError(f"{v} has more than {precision} digits")
    return i.to_bytes(16, "little", signed=True)


def _micros(v: Any) -> int:
    if not isinstance(v, dt.datetime):
        raise TypeError(f"{v!r} is not a datetime")
    epoch = _EPOCH if v.tzinfo is None else _EPOCH_UTC
    return (v - epoch) // _MICROSECOND
