"""The Arrow schema of a view's table as it travels in a write report (base64 Arrow IPC)."""

from __future__ import annotations

import base64
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pyarrow as pa


def encode_schema(schema: pa.Schema) -> str:
    return base64.b64encode(schema.serialize().to_pybytes()).decode()


def plain_type(t: pa.DataType) -> pa.DataType:
    """``t`` with a view type (delta-rs reads strings and binaries as string_view / binary_view) as its plain type,
    which every pyarrow kernel and filter takes; any other type as it is."""
    import pyarrow as pa

    return pa.string() if t == pa.string_view() else pa.binary() if t == pa.binary_view() else t


def decode_schema(text: str) -> pa.Schema:
    import pyarrow as pa

    return pa.ipc.read_schema(pa.py_buffer(base64.b64decode(text)))
