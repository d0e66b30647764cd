"""The refresh modes in the order write tries them, and the choice among them.

The first mode that applies (:meth:`~mvsink.incremental.modes.base.RefreshMode.applies`) and succeeds computes the
corrections; a refusal of kind ``change`` ends the search (no mode can use the change). If none runs, the full
diff follows, with the reason of :func:`~mvsink.incremental.modes.base.combined_reason`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from mvsink.incremental.modes.aggregate import AggregateState
from mvsink.incremental.modes.base import Change, NotApplicable, PlanFacts, RefreshMode, combined_reason
from mvsink.incremental.modes.groups import AffectedGroups
from mvsink.incremental.modes.linear import Linear
from mvsink.incremental.modes.topk import TopK

if TYPE_CHECKING:
    from mvsink.core.batch import WriteMode

REFRESH_MODES: tuple[RefreshMode, ...] = (Linear(), AggregateState(), AffectedGroups(), TopK())


@dataclasses.dataclass(frozen=True)
class Choice:
    """The corrections (None: take the full diff), the mode that computed them, and why."""

    corrections: Any
    mode: WriteMode
    reason: str


def choose(modes: Sequence[RefreshMode], plan: PlanFacts, change: Change, inputs: Any) -> Choice:
    """Run the first of ``modes`` that applies and succeeds; else say why none did (mode ``full``)."""
    refusals: list[tuple[RefreshMode, NotApplicable]] = []
    for mode in modes:
        decision = mode.applies(plan, change)
        if decision is None:
            got = mode.run(inputs, change)
            if not isinstance(got, NotApplicable):
                return Choice(got.data, mode.name, got.reason)
            decision = got
        refusals.append((mode, decision))
        if decision.kind == "change":
            break
    return Choice(None, "full", combined_reason(refusals))


def decide(modes: Sequence[RefreshMode], plan: PlanFacts, change: Change) -> tuple[RefreshMode | None, str]:
    """The mode a change would take, judged on the plan alone (no data read), or (None, why none would)."""
    refusals: list[tuple[RefreshMode, NotApplicable]] = []
    for mode in modes:
        decision = mode.applies(plan, change)
        if decision is None:
            return mode, ""
        refusals.append((mode, decision))
        if decision.kind == "change":
            break
    return None, combined_reason(refusals)
