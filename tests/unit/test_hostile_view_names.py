"""Hostile view names are refused by the parser and found nowhere by a catalog lookup."""

from __future__ import annotations

import json

import pytest

from mvsink.definitions.catalog import Catalog
from mvsink.definitions.viewfile import parse_view
from mvsink.exceptions import ViewDefinitionError
from tests.support.viewfiles import view_text


@pytest.mark.unit
@pytest.mark.parametrize("name", ["../x", "a/b", "x;rm -rf /", "X", "", "v\n", "a b", "1v", "_v", "é"])
def test_hostile_view_names_are_refused(tmp_path, name):
    with pytest.raises(ViewDefinitionError, match="is not a valid view name"):
        parse_view(view_text(name=json.dumps(name)), file=str(tmp_path / "v.yaml"), data_root=tmp_path)


@pytest.mark.unit
def test_catalog_lookup_of_a_hostile_name_finds_nothing(tmp_path):
    (tmp_path / "v.yaml").write_text(view_text())
    for name in ("../v", "v/../v", "/etc/passwd", "v.yaml"):
        with pytest.raises(ViewDefinitionError, match="is not defined in"):
            Catalog(tmp_path).get(name)
