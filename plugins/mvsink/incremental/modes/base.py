"""The interface every refresh mode implements, and what the modes decide on.

A mode is a strategy (:class:`RefreshMode`): ``applies`` answers, from the view's analysed plan and the
refresh's change alone (no data read), whether it can run; ``run`` computes the corrections, or refuses with a
reason after all (a guard on the data). A refusal is a :class:`NotApplicable` with a ``kind``, so the registry
(:mod:`mvsink.incremental.modes.registry`) picks the next mode, and words the full diff's reason, without reading
reason strings. The full diff (:mod:`mvsink.incremental.modes.full`) is the last mode: it always applies.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Literal, Protocol

from mvsink.spark.connectplan import has_plan

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, Observation, SparkSession

    from mvsink.core.batch import BatchDescription, WriteMode
    from mvsink.core.table import ViewTable
    from mvsink.definitions.view import ViewDefinition
    from mvsink.incremental.aggplan import StatePlan
    from mvsink.incremental.telescope import ChangeInputs
    from mvsink.plan.tree import PlanNode
    from mvsink.settings import Setting

Kind = Literal["unrelated", "shape", "checks", "disabled", "change", "refused"]
"""Why a mode does not apply:

* ``unrelated``: the view has nothing this mode refreshes (no aggregate state; no ``ORDER BY ... LIMIT``):
  left out of the full diff's reason;
* ``shape``: the query (or the view file) has something the mode refuses;
* ``checks``: the view has checks, whose totals the mode cannot count;
* ``disabled``: a setting turns the mode off (``setting`` names it);
* ``change``: the sources' change cannot be used by any mode (no earlier refresh, the table moved, a source
  re-created, a change set too large ...): the search ends, the full diff follows;
* ``refused``: the mode looked at the data and declined (a guard: too many groups, a broken invariant ...).
"""


@dataclasses.dataclass(frozen=True)
class NotApplicable:
    """A mode's refusal: why, what kind of reason, and for ``disabled`` the setting that enables the mode."""

    reason: str
    kind: Kind
    setting: str | None = None


Decision = NotApplicable | None
"""What ``applies`` answers: None when the mode can run, else why not."""


@dataclasses.dataclass(frozen=True)
class Corrections:
    """A mode's result: the corrections (a DataFrame, or an Arrow table computed in the driver) and how.

    ``counts_change``: the view's check observation counted the change's rows (signed), to be added to the
    last refresh's totals (else it counted the whole view).
    """

    data: DataFrame | pa.Table
    reason: str
    counts_change: bool = False


@dataclasses.dataclass(frozen=True)
class Change:
    """The sources whose change a refresh applies (their names, in the view file's order); ``refusal``: why no
    incremental mode may use it (kind ``change``, decided by :func:`mvsink.incremental.modes.full.refresh_change`)."""

    sources: tuple[str, ...]
    refusal: NotApplicable | None = None


@dataclasses.dataclass
class PlanFacts:
    """What the modes decide on, read once per write step: the view, its query analysed (``result``), the
    aggregate state its table keeps (or None), whether it has checks; and its plan trees, read on first use.

    ``no_state``: why the view keeps no state, when known (for ``mvsink explain``).
    """

    spark: SparkSession
    view: ViewDefinition
    result: DataFrame
    state: StatePlan | None
    with_error: bool
    no_state: str | None = None

    @property
    def desired(self) -> DataFrame:
        """The query the table holds: the state query (visible columns, then the state) or the view's."""
        return self.state.desired if self.state is not None else self.result

    @functools.cached_property
    def plan_readable(self) -> bool:
        """The query's analysed plan can be taken apart as in a classic session: always there; over Spark Connect
        where the server has mvsink's plugin (:func:`mvsink.spark.connectplan.has_plan`)."""
        return has_plan(self.result)

    @functools.cached_property
    def tree(self) -> PlanNode | str:
        """The view's query's analysed plan, or why it could not be read."""
        return self._tree(self.view.query, self.result)

    @functools.cached_property
    def desired_tree(self) -> PlanNode | str:
        """The plan of :attr:`desired` (the view's own when it keeps no state)."""
        return self.tree if self.state is None else self._tree(self.view.query, self.state.desired)

    @functools.cached_property
    def input_tree(self) -> PlanNode | str:
        """The plan of the aggregate's input (the state query's FROM/WHERE), or why not; only with state."""
        if self.state is None:
            return "the view keeps no aggregate state"
        return self._tree(self.state.queries.input_query, self.state.input)

    def _tree(self, query: str, df: DataFrame | None) -> PlanNode | str:
        from mvsink.plan.read import plan_tree
        from mvsink.plan.tree import PlanFormatError

        try:
            return plan_tree(self.spark, query, desired=df)
        except PlanFormatError as exc:
            return f"the plan could not be read: {exc}"


@dataclasses.dataclass(frozen=True)
class WriteInputs:
    """Everything a mode's ``run`` needs of the write step (:func:`mvsink.write.job.run_write`).

    ``table_df()``: the view's table as Spark reads it (made once per write step, for the modes that need it).
    """

    spark: SparkSession
    view: ViewDefinition
    desc: BatchDescription
    base: dict[str, int]
    result: DataFrame
    state: StatePlan | None
    table: ViewTable
    table_df: Callable[[], DataFrame]
    with_error: bool
    check_obs: Observation | None

    def changes(self, change: Change) -> ChangeInputs:
        """What an incremental mode reads ``change`` with: its changed sources, in the description's order."""
        from mvsink.incremental.telescope import ChangeInputs

        names = set(change.sources)
        changed = [s for s in self.desc.sources if s.name in names]
        return ChangeInputs(self.spark, self.view, self.desc, self.base, changed)


class RefreshMode(Protocol):
    """One refresh mode.

    ``name``: the mode recorded in the commit info; ``title``: how a reason names it ("affected-groups");
    ``label``: how ``mvsink explain`` names it ("affected groups"); ``phrase``: how the full diff's reason says it
    did not apply ("by affected groups"; None for the first mode, whose reason leads); ``setting``: the setting
    that turns it on or off (None: always on); ``guard``: what the data may still refuse at refresh time (for
    ``mvsink explain``, which cannot see it).
    """

    @property
    def name(self) -> WriteMode: ...

    @property
    def title(self) -> str: ...

    @property
    def label(self) -> str: ...

    @property
    def phrase(self) -> str | None: ...

    @property
    def setting(self) -> Setting | None: ...

    @property
    def guard(self) -> str | None: ...

    def applies(self, plan: PlanFacts, change: Change) -> Decision:
        """Can the mode run for this plan and this change? Decided without reading data."""
        ...

    def fits(self, plan: PlanFacts, change: Change) -> Decision:
        """``applies``, with the mode's setting taken as on (what turning it on would do)."""
        ...

    def run(self, plan: PlanFacts, inputs: WriteInputs, change: Change) -> Corrections | NotApplicable:
        """The corrections, or why the mode declined after all."""
        ...


def switched(mode: RefreshMode, on: bool, plan: PlanFacts, change: Change) -> Decision:
    """``applies`` of a mode its setting turns on or off (``on``: the setting's value): ``fits``, or a refusal of
    kind ``disabled`` naming the setting."""
    if on:
        return mode.fits(plan, change)
    assert mode.setting is not None
    return NotApplicable(f"the {mode.title} refresh is off", "disabled", setting=mode.setting.name)


def outcome(corr: DataFrame | pa.Table | None, why: str) -> Corrections | NotApplicable:
    """A mode's ``run`` from what its corrections function returned: the corrections, or (None) a refusal of
    kind ``refused`` with its reason."""
    return Corrections(corr, why) if corr is not None else NotApplicable(why, "refused")


def combined_reason(refusals: Sequence[tuple[RefreshMode, NotApplicable]]) -> str:
    """The full diff's reason from each mode's refusal, in the registry's order.

    The first refusal leads; each later one adds ``; and not <phrase>: <reason>``; modes turned off add
    ``(the <title> refresh is off; <SETTING>=true enables it)``, those sharing a setting in one parenthesis;
    ``unrelated`` ones are left out.
    """
    said = [(m, r) for m, r in refusals if r.kind != "unrelated"]
    text = ""
    i = 0
    while i < len(said):
        mode, r = said[i]
        if r.kind == "disabled":
            titles = [mode.title]
            while i + 1 < len(said) and said[i + 1][1].kind == "disabled" and said[i + 1][1].setting == r.setting:
                i += 1
                titles.append(said[i][0].title)
            many = len(titles) > 1
            text += (
                f" (the {' and '.join(titles)} {'refreshes are' if many else 'refresh is'} off; "
                f"{r.setting}=true enables {'them' if many else 'it'})"
            )
        elif not text or mode.phrase is None:
            text = r.reason if not text else f"{text}; {r.reason}"
        else:
            text = f"{text}; and not {mode.phrase}: {r.reason}"
        i += 1
    return text.strip()
