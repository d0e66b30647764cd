"""The incremental modes in the order write tries them (:data:`INCREMENTAL_MODES`; the registry puts the full diff
after them), and which changes of a view's sources none of them applies to, judged on the view's plan alone
(:func:`full_only_changes`): where a refresh without Spark may compute the full diff at once
(:func:`mvsink.incremental.driverfacts.remember_full`), since a Spark refresh would come to it too."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Final

from mvsink.incremental.driverfacts import term_key
from mvsink.incremental.modes.aggregate import AggregateState
from mvsink.incremental.modes.base import Change, PlanFacts, RefreshMode
from mvsink.incremental.modes.groups import AffectedGroups
from mvsink.incremental.modes.linear import Linear
from mvsink.incremental.modes.partitioned import Partitioned
from mvsink.incremental.modes.topk import TopK

INCREMENTAL_MODES: Final[tuple[RefreshMode, ...]] = (
    Linear(),
    AggregateState(),
    AffectedGroups(),
    TopK(),
    Partitioned(),
)
MAX_SOURCES: Final = 6  # views of more sources are not judged (every set of changed sources is judged)


def full_only_changes(plan: PlanFacts, names: Sequence[str], *, incremental: bool = True) -> tuple[str, ...]:
    """The sets of changed sources (:func:`~mvsink.incremental.driverfacts.term_key` of their names, in the
    view file's order) that every incremental mode refuses by ``plan`` (its ``applies``: the plan and the
    settings, no data read), every set where the view is not ``incremental``; empty for a view of more than
    :data:`MAX_SOURCES` sources."""
    if len(names) > MAX_SOURCES:
        return ()
    out = []
    for k in range(1, len(names) + 1):
        for subset in itertools.combinations(names, k):
            change = Change(tuple(subset))
            if not incremental or all(m.applies(plan, change) is not None for m in INCREMENTAL_MODES):
                out.append(term_key(subset))
    return tuple(out)
