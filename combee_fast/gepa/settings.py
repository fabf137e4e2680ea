"""GEPA's own settings and flags, declared by its kind (:class:`~combee_fast.gepa.kind.GepaKind`
``settings``, ``flags``): a run's ``[learners.gepa]`` section (the ``[gepa]`` table of config files
written before learners had sections is read as it), read by :func:`settings`.

    GepaConfig        the search: minibatches, the metric-call budget, passes, skip_perfect
    └── pipeline:     PipelineConfig  async-gepa's stages
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

import msgspec

from combee_fast.config import AUTO, at_least
from combee_fast.errors import ConfigError
from combee_fast.protocols.flags import Flag, batch_size, positive_int

if TYPE_CHECKING:
    from combee_fast.config import SessionConfig

SECTION = "gepa"
"""The learner's name: its section of a configuration (``learners.gepa``)."""

STALENESS_POLICIES = ("full", "guarded")
"""What the asynchronous GEPA pipeline does with a proposal the pool moved past (:mod:`combee_fast.gepa.staleness`)."""


class PipelineConfig(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """The asynchronous GEPA pipeline (method ``async-gepa``, :mod:`combee_fast.gepa.pipeline`).

    ``proposals``: proposals in flight at once (1: the synchronous loop, one iteration after the
    other). The other limits are each stage's tasks in flight at once: ``grade`` (parents graded
    on their minibatch), ``reflect`` (reflection maps), ``aggregate`` (aggregation trees),
    ``screen`` (children graded on their minibatch) and ``validate`` (accepted children graded on
    the validation set); no stage queue holds more than ``proposals`` tasks. ``staleness``: what
    happens to a child whose pool moved on while it was made (``full``: it is screened against
    the pool as it now is; ``guarded``: it is dropped when more than ``max_staleness`` candidates
    joined the pool since its parent was drawn). ``reflection``: how a proposal reflects, ``combee``
    (shuffled groups and the aggregation tree, as ``combee-gepa``) or ``serial`` (one call, as
    serial GEPA; its merge stage makes no call). ``merge``: a child that joins after other
    candidates joined since its base was taken (siblings proposed against the same pool, each
    screened before any of them joined) has its changes made to the best of those, and that merge
    is validated and joins too, so the lessons of proposals run side by side meet in one
    candidate; each merge costs a validation on the search's path (off: siblings stay apart).
    With it, once the search drains, the candidates tied at the best validation score are merged
    into one too (the closing merge: one more validation, :mod:`combee_fast.gepa.pipeline`).
    ``speculate``: a child whose minibatch lies in the validation set, screened against its
    parent, is graded on the whole validation set at once, its minibatch first: its acceptance
    is decided when those solves end (the ones a screening makes), and an accepted child's
    validation is the rest of that grading, already running (one grading fewer on its path, its
    minibatch not solved twice); a rejected child's other solves were made for nothing (off:
    screened, then validated once accepted, as GEPA does).
    """

    proposals: int = 4
    grade: int = 4
    reflect: int = 4
    aggregate: int = 4
    screen: int = 4
    validate: int = 4
    staleness: str = "full"
    max_staleness: int = 2
    reflection: str = "combee"
    merge: bool = False
    speculate: bool = False

    def __post_init__(self) -> None:
        at_least("gepa.pipeline", 1, proposals=self.proposals, grade=self.grade, reflect=self.reflect,
                  aggregate=self.aggregate, screen=self.screen, validate=self.validate)
        at_least("gepa.pipeline", 0, max_staleness=self.max_staleness)
        if self.staleness not in STALENESS_POLICIES:
            raise ConfigError(f"gepa.pipeline.staleness must be one of {', '.join(STALENESS_POLICIES)}, "
                              f"got {self.staleness!r}")
        if self.reflection not in ("combee", "serial"):
            raise ConfigError(f"gepa.pipeline.reflection must be combee or serial, got {self.reflection!r}")

    def limits(self) -> dict[str, int]:
        """Each stage's in-flight limit, by stage name, in the order a proposal goes through them."""
        return {"grade": self.grade, "reflect": self.reflect, "aggregate": self.aggregate, "screen": self.screen,
                "validate": self.validate}


class GepaConfig(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """GEPA's evolutionary search over a system prompt (learner ``gepa``).

    ``minibatch``: examples per iteration of serial GEPA (method ``gepa``, GEPA's default);
    ``combee_minibatch``: examples per iteration of the batched methods (``combee-gepa``,
    ``async-gepa``, and ``naive`` on the GEPA learner); ``"auto"`` (read as None): the live
    planner sizes each iteration's minibatch. ``max_metric_calls``: the budget; every evaluation
    of a candidate on one example (minibatch or validation) is one metric call, as GEPA counts
    them, and no iteration starts once it is spent (``async-gepa`` reserves each proposal's calls
    when it starts it, so it never spends past the budget). ``max_epochs``: also stop before the
    first minibatch of that pass over the train split (None: the budget alone stops the search;
    GEPA does not read ``train.epochs``). ``skip_perfect``: no reflection when the parent
    already scores 1 on the whole minibatch (GEPA's default). ``pipeline``: ``async-gepa``'s stages.
    """

    minibatch: int = 3
    combee_minibatch: int | Literal["auto"] | None = 40
    max_metric_calls: int = 3000
    max_epochs: int | None = None
    skip_perfect: bool = True
    pipeline: PipelineConfig = msgspec.field(default_factory=PipelineConfig)

    def __post_init__(self) -> None:
        if self.combee_minibatch == AUTO:
            msgspec.structs.force_setattr(self, "combee_minibatch", None)
        at_least("gepa", 1, minibatch=self.minibatch, combee_minibatch=self.combee_minibatch,
                  max_metric_calls=self.max_metric_calls, max_epochs=self.max_epochs)



def settings(config: SessionConfig) -> GepaConfig:
    """GEPA's settings in ``config`` (its ``learners.gepa`` section; the defaults without one)."""
    return config.learner_settings(SECTION, GepaConfig)


FLAGS = (
    Flag("--max-metric-calls", path=("max_metric_calls",), type=positive_int,
         help="GEPA: budget of metric calls (one per candidate graded on one example)"),
    Flag("--minibatch", path=("minibatch",), type=positive_int, help="GEPA: examples per serial iteration"),
    Flag("--combee-minibatch", path=("combee_minibatch",), type=batch_size,
         help="GEPA: examples per iteration of combee-gepa, async-gepa and naive-gepa, an integer or 'auto' "
              "(the live planner)"),
    Flag("--proposals-in-flight", path=("pipeline", "proposals"), type=positive_int,
         help="async-gepa: proposals in flight at once (1: the synchronous loop; the ceiling under 'auto')"),
    Flag("--staleness", path=("pipeline", "staleness"), choices=STALENESS_POLICIES,
         help="async-gepa: a child the pool moved past is re-screened against the pool's best (full) or dropped "
              "once older than --max-staleness (guarded)"),
    Flag("--max-staleness", path=("pipeline", "max_staleness"), type=int,
         help="async-gepa: candidates that may join the pool while a child is made before guarded drops it"),
)
"""GEPA's flags (``combee learn``), each setting a field of its section."""
