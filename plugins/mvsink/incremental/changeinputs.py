"""What the incremental modes read a refresh's source changes with, as one value each.

Every incremental mode reads the sources' changes since the last refresh and makes change terms of them
(:mod:`mvsink.incremental.telescope`): :class:`ChangeInputs` is what that needs of the write step, handed down
as one value instead of five arguments; :class:`ChangeTerms` adds the changed sources' change frames
(:func:`mvsink.incremental.linear.prepare_changes`), what the change terms are made of.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from mvsink.core.batch import BatchDescription, SourceRead
    from mvsink.definitions.view import ViewDefinition


@dataclasses.dataclass(frozen=True)
class ChangeInputs:
    """One refresh's reads: the session, the view, the batch description (the versions and the time it reads),
    each source's version at the last refresh (``base``) and the sources that changed since (in the
    description's order; the change already found usable: :func:`mvsink.incremental.modes.full.refresh_change`)."""

    spark: SparkSession
    view: ViewDefinition
    desc: BatchDescription
    base: dict[str, int]
    changed: list[SourceRead]

    def terms(self, frames: dict[str, tuple[DataFrame, DataFrame]]) -> ChangeTerms:
        """These reads with the changed sources' change frames."""
        return ChangeTerms(self.spark, self.view, self.desc, self.base, self.changed, frames)


@dataclasses.dataclass(frozen=True)
class ChangeTerms(ChangeInputs):
    """:class:`ChangeInputs` with the changed sources' change frames: (inserted rows, deleted rows) per changed
    source (a :class:`~mvsink.incremental.telescope.ChangeFrames`, or a plain dict of them)."""

    frames: dict[str, tuple[DataFrame, DataFrame]]
