"""A learner kind completed: every optional member of :class:`~combee_fast.protocols.CompleteKind`
a learner's package leaves out, defined here once.

A package writes the seven members of :class:`~combee_fast.protocols.LearnerKind` (``name``,
``roles``, ``artifact_type``, ``initial``, ``build_method``, ``evaluate``, ``load``) and any of
these, each replacing its default:

    methods          {"sequential": name, "naive": "naive-" + name, "combee": "combee-" + name}
    citable          False
    rollout_role     the request name of its first ``serve`` role
    learning_roles   the request names of its roles outside the ``serve`` pool
    size_unit        "size"
    responders       {}: the simulated endpoint does not play its roles; else how it answers each,
                     by request role name (:data:`~combee_fast.sim.responders.RoleResponder`)
    settings         None: no settings of its own; else a msgspec Struct type, its section
                     ``learners.<name>`` of a configuration decoded as it
                     (:meth:`~combee_fast.config.SessionConfig.learner_settings`)
    flags            (): no flags of its own; else :class:`~combee_fast.protocols.flags.Flag` values,
                     each a path inside its section (``combee learn`` offers them under ``learners.<name>``)
    encode_artifact  MessagePack of the artifact (``artifact_type`` a msgspec Struct, or a type
    decode_artifact  msgspec encodes), decoded as ``artifact_type`` (engine/kept.StructArtifact)
    batch_size       ``train.batch_size`` (None: the batch-size controller)
    live_plan        None (the generic live planner)
    stop_rules       ``train.epochs`` passes over the train split
    deployable       the artifact itself
    version_files    ``versions/v<version>.json``: the artifact as JSON (msgspec)
    load_version     that file read as ``artifact_type`` (version 0: the initial artifact), as its
                     deployable
    lessons          the non-blank lines of the deployable's context text
    summary          {}
    improvements     ``(explored, accepted)`` of one apply's report: added plus rejected, added
                     (:func:`~combee_fast.money.improvements.change_counts`)
    online_learner   a ConfigError: the learner cannot learn online

:class:`Kind` is what every registry answers (:mod:`combee_fast.learners`) and all the core reads:
the session, the run loop, the run directory, checkpoints, ``verify`` and the CLI never look at a
learner's own object.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from combee_fast.engine.kept import StructArtifact
from combee_fast.errors import ConfigError
from combee_fast.methods import METHODS
from combee_fast.money.improvements import change_counts
from combee_fast.protocols.flags import Flag
from combee_fast.roles.spec import Role, first_of
from combee_fast.run.stops import EpochsDone

if TYPE_CHECKING:
    from combee_fast.config import SessionConfig
    from combee_fast.methods.base import EvalResult
    from combee_fast.protocols.learning import LearnContext, OnlineLearning
    from combee_fast.protocols.running import BatchPlan, DecisionLog, Method, StopRule
    from combee_fast.roles.calls import RoleCalls
    from combee_fast.schema import Example
    from combee_fast.sim.responders import RoleResponder

REQUIRED = ("name", "roles", "artifact_type", "initial", "build_method", "evaluate", "load")
"""The members every learner kind has (:class:`~combee_fast.protocols.LearnerKind`)."""

OPTIONAL_METHODS = ("encode_artifact", "decode_artifact", "batch_size", "live_plan", "stop_rules", "deployable",
                    "version_files", "load_version", "lessons", "summary", "improvements", "online_learner")
"""The methods a learner kind may have, each replacing the default of :class:`Kind`."""

VERSIONS_FOLDER = "versions"
"""Where the default :meth:`Kind.version_files` keeps a run's versions."""


def default_methods(name: str) -> dict[str, str]:
    """The methods of a learner that gives none: every generic method, shown with its name."""
    return {method: name if method == "sequential" else f"{method}-{name}" for method in METHODS}


class Kind(StructArtifact):
    """``raw`` (a learner's :class:`~combee_fast.protocols.LearnerKind`) completed with the
    defaults of the module docstring; ``key`` is the name or path it was registered by.
    ConfigError naming ``key`` when a required member is missing or a member is not of its form."""

    def __init__(self, raw: Any, key: str) -> None:
        missing = [member for member in REQUIRED if not hasattr(raw, member)]
        if missing:
            raise ConfigError(f"learner {key!r}: {type(raw).__name__} lacks the learner member(s) "
                              f"{', '.join(missing)} (a learner kind has {', '.join(REQUIRED)})")
        self.raw, self.key = raw, key
        self.name: str = raw.name
        self.roles: tuple[Role, ...] = tuple(raw.roles)
        if not self.roles or not all(isinstance(role, Role) for role in self.roles):
            raise ConfigError(f"learner {key!r}: roles must be combee_fast.roles.spec.Role values, at least one")
        self.artifact_type: type[Any] = raw.artifact_type
        self.methods: Mapping[str, str] = dict(getattr(raw, "methods", None) or default_methods(self.name))
        self.citable: bool = bool(getattr(raw, "citable", False))
        self.rollout_role: str = getattr(raw, "rollout_role", None) or self._first_serving(key).key
        self.learning_roles: tuple[str, ...] = tuple(getattr(raw, "learning_roles", None) or
                                                     (role.key for role in self.roles if role.pool != "serve"))
        self.size_unit: str = getattr(raw, "size_unit", None) or "size"
        self.responders: Mapping[str, RoleResponder] = dict(getattr(raw, "responders", None) or {})
        self.settings: type[msgspec.Struct] | None = getattr(raw, "settings", None)
        if self.settings is not None and not (isinstance(self.settings, type) and
                                              issubclass(self.settings, msgspec.Struct)):
            raise ConfigError(f"learner {key!r}: settings must be a msgspec.Struct type, got {self.settings!r}")
        self.flags: tuple[Flag, ...] = tuple(getattr(raw, "flags", None) or ())
        if self.flags and self.settings is None:
            raise ConfigError(f"learner {key!r}: it declares flags but no settings for them to set")
        if not all(isinstance(flag, Flag) for flag in self.flags):
            raise ConfigError(f"learner {key!r}: flags must be combee_fast.protocols.flags.Flag values")
        for member in OPTIONAL_METHODS:  # a learner's own member replaces the default below
            if hasattr(raw, member):
                setattr(self, member, getattr(raw, member))

    def _first_serving(self, key: str) -> Role:
        try:
            return first_of(self.roles, "serve")
        except ConfigError:
            raise ConfigError(f"learner {key!r}: no role in pool 'serve' (the role whose calls are rollouts); "
                              "declare one, or rollout_role") from None

    # -- the required members, as the learner has them ---------------------------------------------

    def initial(self, config: SessionConfig) -> Any:
        return self.raw.initial(config)

    def build_method(self, method: str, context: LearnContext) -> Method[Any]:
        """The learner's method ``method``, named as :attr:`methods` shows it."""
        built: Method[Any] = self.raw.build_method(method, context)
        built.name = self.methods[method]
        return built

    async def evaluate(self, context: LearnContext, deployable: Any, examples: Sequence[Example]) -> EvalResult:
        result: EvalResult = await self.raw.evaluate(context, deployable, examples)
        return result

    def load(self, path: str | Path) -> Any:
        return self.raw.load(path)

    # -- the defaults --------------------------------------------------------------------------------

    def batch_size(self, method: str, config: SessionConfig) -> int | None:
        size = config.train.batch_size
        return size if isinstance(size, int) else None  # "auto" is read as None

    def live_plan(self, method: str, config: SessionConfig, run_dir: DecisionLog | None) -> BatchPlan | None:
        return None

    def stop_rules(self, config: SessionConfig) -> list[StopRule]:
        return [EpochsDone(config.train.epochs)]

    def deployable(self, artifact: Any) -> Any:
        return artifact

    def version_files(self, artifact: Any) -> list[tuple[str, bytes]]:
        return [(f"{VERSIONS_FOLDER}/v{artifact.version:05d}.json", msgspec.json.encode(artifact))]

    def load_version(self, root: Path, version: int, config: SessionConfig) -> Any:
        if not version:
            return self.deployable(self.initial(config))
        data = (root / VERSIONS_FOLDER / f"v{version:05d}.json").read_bytes()
        return self.deployable(msgspec.json.decode(data, type=self.artifact_type))

    def lessons(self, artifact: Any) -> list[str]:
        return [line for line in self.deployable(artifact).render().splitlines() if line.strip()]

    def summary(self, artifact: Any) -> dict[str, Any]:
        return {}

    def improvements(self, report: Any) -> tuple[int, int]:
        return change_counts(report)

    def online_learner(self, calls: RoleCalls) -> OnlineLearning[Any, Any, Any]:
        raise ConfigError(f"learner {self.key!r} cannot learn online from submitted rollouts")
