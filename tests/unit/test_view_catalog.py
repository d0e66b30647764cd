"""Loading a views folder: load_views isolates broken files; Catalog lookups, upstream views and their errors."""

from __future__ import annotations

import pytest

from mvsink.definitions.catalog import Catalog, load_views
from mvsink.exceptions import ViewDefinitionError
from tests.support.viewfiles import doc

pytestmark = [pytest.mark.unit, pytest.mark.usefixtures("no_mvsink_env")]


@pytest.fixture
def folder(tmp_path, monkeypatch):
    monkeypatch.setenv("MVSINK_DATA_ROOT", str(tmp_path / "data"))
    d = tmp_path / "views"
    d.mkdir()
    (d / "alpha.yaml").write_text(doc(name="alpha"))
    (d / "beta.yml").write_text(doc(name="beta", sources="{up: {view: alpha}}", query="SELECT a FROM up"))
    (d / "broken.yaml").write_text(doc(name="broken", query="SELECT rand() FROM orders"))
    (d / "notes.txt").write_text("not a view")
    return d


def test_load_views_isolates_broken_file(folder, tmp_path):
    views, errors = load_views(folder)
    assert sorted(views) == ["alpha", "beta"]
    assert views["alpha"].sources[0].path.uri == str((tmp_path / "data" / "orders").resolve())
    assert list(errors) == [str(folder / "broken.yaml")]
    assert isinstance(errors[str(folder / "broken.yaml")], ViewDefinitionError)
    assert "non-deterministic function rand()" in str(errors[str(folder / "broken.yaml")])


def test_load_views_duplicate_name(folder):
    (folder / "zeta.yaml").write_text(doc(name="alpha"))
    views, errors = load_views(folder)
    assert views["alpha"].file == str(folder / "alpha.yaml")
    assert sorted(errors) == [str(folder / "broken.yaml"), str(folder / "zeta.yaml")]
    msg = str(errors[str(folder / "zeta.yaml")])
    assert msg == (
        f"view file {folder / 'zeta.yaml'}: field 'name': view 'alpha' is already defined in "
        f"{folder / 'alpha.yaml'}. Fix: give each view a unique name."
    )


def test_catalog_get_and_upstream(folder):
    cat = Catalog(folder)
    beta = cat.get("beta")
    assert cat.upstream(beta, beta.source("up")) is cat.get("alpha")


def test_catalog_get_unknown_lists_known(folder):
    with pytest.raises(ViewDefinitionError) as ei:
        Catalog(folder).get("gamma")
    assert str(ei.value) == (
        f"view 'gamma' is not defined in {folder} (views found: alpha, beta). Fix: check the name or pass --views-dir."
    )


def test_catalog_get_broken_stem_raises_file_error(folder):
    cat = Catalog(folder)
    with pytest.raises(ViewDefinitionError) as ei:
        cat.get("broken")
    assert ei.value is cat.errors[str(folder / "broken.yaml")]
    assert f"view file {folder / 'broken.yaml'}: field 'query'" in str(ei.value)


def test_catalog_upstream_broken(folder):
    (folder / "gamma.yaml").write_text(doc(name="gamma", sources="{up: {view: broken}}", query="SELECT a FROM up"))
    cat = Catalog(folder)
    g = cat.get("gamma")
    with pytest.raises(ViewDefinitionError) as ei:
        cat.upstream(g, g.source("up"))
    msg = str(ei.value)
    assert msg.startswith("view gamma: source 'up' names view 'broken', which cannot be loaded: view file ")
    assert "non-deterministic" in msg


def test_catalog_missing_folder(tmp_path):
    with pytest.raises(ViewDefinitionError) as ei:
        Catalog(tmp_path / "nope")
    assert str(ei.value) == (
        f"views folder {tmp_path / 'nope'} does not exist. Fix: pass --views-dir or set MVSINK_VIEWS_DIR."
    )


def test_catalog_default_folder_from_env(folder, monkeypatch):
    monkeypatch.setenv("MVSINK_VIEWS_DIR", str(folder))
    assert Catalog().views_dir == folder


def test_catalog_empty_folder_lists_none(tmp_path):
    with pytest.raises(ViewDefinitionError, match=r"views found: none"):
        Catalog(tmp_path).get("x")
