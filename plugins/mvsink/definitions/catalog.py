"""The views of one folder: loading every view file, looking views up by name."""

from __future__ import annotations

import os
from pathlib import Path

from mvsink import settings
from mvsink.definitions.view import VIEWS_DIR_ENV, Source, ViewDefinition
from mvsink.definitions.viewfile import load_view_file
from mvsink.exceptions import ViewDefinitionError


def view_files(views_dir: str | os.PathLike[str]) -> list[Path]:
    d = Path(views_dir)
    return sorted([*d.glob("*.yaml"), *d.glob("*.yml")])


def default_views_dir() -> Path:
    """``MVSINK_VIEWS_DIR``, else ``dags/views``."""
    return settings.views_dir()


def load_views(views_dir: str | os.PathLike[str]) -> tuple[dict[str, ViewDefinition], dict[str, ViewDefinitionError]]:
    """Load every view file of a folder. A broken file is reported alone, never fails the rest."""
    views: dict[str, ViewDefinition] = {}
    errors: dict[str, ViewDefinitionError] = {}
    for f in view_files(views_dir):
        try:
            v = load_view_file(f)
        except ViewDefinitionError as exc:
            errors[str(f)] = exc
            continue
        if v.name in views:
            errors[str(f)] = ViewDefinitionError(
                f"view file {f}: field 'name': view {v.name!r} is already defined in {views[v.name].file}. "
                "Fix: give each view a unique name."
            )
            continue
        views[v.name] = v
    return views, errors


class Catalog:
    """The views of one folder, looked up by name (view sources resolve through it)."""

    def __init__(self, views_dir: str | os.PathLike[str] | None = None):
        self.views_dir = Path(views_dir) if views_dir is not None else default_views_dir()
        if not self.views_dir.is_dir():
            raise ViewDefinitionError(
                f"views folder {self.views_dir} does not exist. Fix: pass --views-dir or set {VIEWS_DIR_ENV}."
            )
        self.views, self.errors = load_views(self.views_dir)

    def get(self, name: str) -> ViewDefinition:
        if name in self.views:
            return self.views[name]
        for f, err in self.errors.items():
            if Path(f).stem == name:
                raise err
        known = ", ".join(sorted(self.views)) or "none"
        raise ViewDefinitionError(
            f"view {name!r} is not defined in {self.views_dir} (views found: {known}). "
            "Fix: check the name or pass --views-dir."
        )

    def upstream(self, view: ViewDefinition, source: Source) -> ViewDefinition:
        assert source.kind == "view" and source.view is not None
        try:
            return self.get(source.view)
        except ViewDefinitionError as exc:
            raise ViewDefinitionError(
                f"view {view.name}: source '{source.name}' names view {source.view!r}, which cannot be loaded: {exc}"
            ) from None


def resolve_view(view: ViewDefinition | str, views_dir: str | None = None) -> ViewDefinition:
    """A view definition, or a view name looked up in ``views_dir`` (default: $MVSINK_VIEWS_DIR)."""
    return view if isinstance(view, ViewDefinition) else Catalog(views_dir).get(view)
