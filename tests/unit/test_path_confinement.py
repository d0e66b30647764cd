"""Paths in view files stay inside the data root (targets, sources, symlinks) unless the operator allows it;
sql_file stays beside its view file."""

from __future__ import annotations

import pytest

from mvsink.definitions.viewfile import load_view_file, parse_view
from mvsink.exceptions import UnsafePathError, ViewDefinitionError
from tests.support.viewfiles import view_text


@pytest.mark.unit
@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("target", "../outside"),
        ("target", "views/../../outside"),
        ("target", "/etc/mvsink_target"),
        ("target", "$HOME/../x"),
        ("sources", "{orders: ../../etc/orders}"),
        ("sources", "{orders: {path: /var/lib/orders}}"),
        ("sources", "{orders: views/../../../orders}"),
    ],
)
def test_paths_leaving_the_data_root_are_refused(tmp_path, monkeypatch, field, value):
    monkeypatch.delenv("MVSINK_ALLOW_OUTSIDE_DATA_ROOT", raising=False)
    root = tmp_path / "data"
    root.mkdir()
    with pytest.raises(UnsafePathError) as ei:
        parse_view(view_text(**{field: value}), file=str(tmp_path / "views" / "v.yaml"), data_root=root)
    msg = str(ei.value)
    assert isinstance(ei.value, ViewDefinitionError) and isinstance(ei.value, ValueError)
    assert "view v" in msg and "v.yaml" in msg and "outside the data root" in msg and str(root) in msg, msg
    assert "Fix:" in msg and "MVSINK_ALLOW_OUTSIDE_DATA_ROOT=1" in msg, msg


@pytest.mark.unit
def test_symlink_out_of_the_data_root_is_refused(tmp_path, monkeypatch):
    monkeypatch.delenv("MVSINK_ALLOW_OUTSIDE_DATA_ROOT", raising=False)
    root, elsewhere = tmp_path / "data", tmp_path / "elsewhere"
    root.mkdir()
    elsewhere.mkdir()
    (root / "link").symlink_to(elsewhere)
    with pytest.raises(UnsafePathError, match="outside the data root"):
        parse_view(view_text(target="link/v"), file=str(tmp_path / "v.yaml"), data_root=root)


@pytest.mark.unit
def test_paths_inside_the_data_root_and_the_documented_option(tmp_path, monkeypatch):
    monkeypatch.delenv("MVSINK_ALLOW_OUTSIDE_DATA_ROOT", raising=False)
    root = tmp_path / "data"
    v = parse_view(
        view_text(target="views/../other/v", sources=f"{{orders: {root / 'orders'}}}"),
        file=str(tmp_path / "v.yaml"),
        data_root=root,
    )
    assert v.target.uri == str(root.resolve() / "other" / "v") and v.sources[0].path.uri == str(
        root.resolve() / "orders"
    )
    # the option lifts the rule (an operator's choice: it is an environment setting, not a view-file field)
    monkeypatch.setenv("MVSINK_ALLOW_OUTSIDE_DATA_ROOT", "1")
    v = parse_view(view_text(target="/srv/lake/v"), file=str(tmp_path / "v.yaml"), data_root=root)
    assert v.target.uri == "/srv/lake/v"
    monkeypatch.setenv("MVSINK_ALLOW_OUTSIDE_DATA_ROOT", "0")
    with pytest.raises(UnsafePathError):
        parse_view(view_text(target="/srv/lake/v"), file=str(tmp_path / "v.yaml"), data_root=root)


@pytest.mark.unit
def test_data_root_defaults_to_the_view_files_folder(tmp_path, monkeypatch):
    monkeypatch.delenv("MVSINK_DATA_ROOT", raising=False)
    monkeypatch.delenv("MVSINK_ALLOW_OUTSIDE_DATA_ROOT", raising=False)
    views = tmp_path / "views"
    views.mkdir()
    (views / "v.yaml").write_text(view_text(target="../v"))
    with pytest.raises(UnsafePathError, match=f"outside the data root {views}"):
        load_view_file(views / "v.yaml")


@pytest.mark.unit
def test_sql_file_must_stay_beside_the_view_file(tmp_path):
    (tmp_path / "secret.sql").write_text("SELECT 'TOP-SECRET-CONTENT' AS a FROM orders")
    views = tmp_path / "views"
    views.mkdir()
    for ref in ("../secret.sql", str(tmp_path / "secret.sql")):
        (views / "v.yaml").write_text(view_text(query=None, sql_file=ref))
        with pytest.raises(UnsafePathError) as ei:
            load_view_file(views / "v.yaml", data_root=tmp_path)
        msg = str(ei.value)
        assert "sql_file" in msg and "outside the view file's folder" in msg and "Fix:" in msg, msg
        assert "TOP-SECRET-CONTENT" not in msg
