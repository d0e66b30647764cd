"""View files for tests: ``write_view`` writes one into a views folder; ``doc``/``parse``/``expect_error``
build the YAML text of a small view and parse it, as the parser's unit tests do."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import pytest
import yaml

from mvsink.definitions.view import ViewDefinition
from mvsink.definitions.viewfile import parse_view
from mvsink.exceptions import ViewDefinitionError

FILE = "views/v.yaml"

MINIMAL = {
    "name": "v",
    "query": "SELECT a FROM orders",
    "sources": "{orders: orders}",
    "target": "out",
    "as_of": "0",
}


def write_view(views_dir: str | Path, name: str, **fields: Any) -> Path:
    """``<views_dir>/<name>.yaml`` with ``name`` and ``fields``."""
    doc = {"name": name, **fields}
    path = Path(views_dir) / f"{name}.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def yml(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


def doc(**fields: str | None) -> str:
    """YAML text of a view: MINIMAL with fields replaced (value None drops the field)."""
    merged = {**MINIMAL, **fields}
    lines = []
    for k, v in merged.items():
        if v is None:
            continue
        if "\n" in v:
            lines.append(f"{k}: |\n" + textwrap.indent(v, "  "))
        else:
            lines.append(f"{k}: {v}")
    return "\n".join(lines) + "\n"


def parse(text: str, root: Path = Path("/data"), file: str = FILE) -> ViewDefinition:
    return parse_view(text, file=file, data_root=root)


def expect_error(text: str, field: str | None, *fragments: str, file: str = FILE) -> str:
    """Parse ``text``, expect a ViewDefinitionError naming the file, ``field`` and a fix; its message."""
    with pytest.raises(ViewDefinitionError) as ei:
        parse(text, file=file)
    msg = str(ei.value)
    assert msg.startswith(f"view file {file}: "), msg
    if field is not None:
        assert f"field '{field}'" in msg, msg
    assert "Fix: " in msg, msg
    for f in fragments:
        assert f in msg, msg
    return msg


def view_text(**fields: str | None) -> str:
    """YAML text of a small valid view (``v`` over ``orders``) with ``fields`` replaced (None drops a field)."""
    doc = {
        "name": "v",
        "query": "SELECT a FROM orders",
        "sources": "{orders: orders}",
        "target": "views/v",
        "as_of": "0",
        **fields,
    }
    return "".join(f"{k}: {v}\n" for k, v in doc.items() if v is not None)
