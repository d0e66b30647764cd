"""The columns of a view's sources, as their Delta logs' newest schemas give them (what the intermediate split of a
correlated subquery resolves names by: :func:`mvsink.definitions.correlated.split_correlated`)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from mvsink.core.table import open_delta
from mvsink.exceptions import SourceError

if TYPE_CHECKING:
    from mvsink.definitions.view import ViewDefinition

log = logging.getLogger(__name__)


def source_columns(view: ViewDefinition) -> dict[str, dict[str, str]] | None:
    """Each source's columns and their types as Spark names them (``long``, ``decimal(15,2)``), by casefolded source
    and column name; None where a source is a view or has no readable table (the split then fails closed)."""
    out: dict[str, dict[str, str]] = {}
    for s in view.sources:
        if s.kind != "path" or s.path is None:
            return None
        try:
            dt = open_delta(s.path)
        except SourceError as exc:
            log.info("view %s: the columns of source %s not read: %s", view.name, s.name, exc)
            return None
        if dt is None:
            return None
        fields = dt.schema().fields
        out[s.name.casefold()] = {f.name.casefold(): str(getattr(f.type, "type", f.type)) for f in fields}
    return out
