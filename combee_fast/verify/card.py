"""The experiment card: a pre-registered description of one claim, checked before anything runs.

A card is a TOML file with these tables (every field but ``task.options`` is required;
:func:`load_card` lists every missing or invalid one at once and never fills one in):

    name = "formula-combee-b40"              the claim's name
    [task]            name, options (optional table, e.g. {test_file = "heldout.jsonl"}: an
                      external test split in the task's format, path relative to the working
                      directory), input_shape, output_shape,
                      success_metric, baseline_test_score (a score in [0, 1] or "unknown")
    [serial_baseline] method (one of :func:`~combee_fast.learners.serial_baselines`: ``sequential``
                      on the compared configuration's learner, or a learner's own serial method,
                      ``gepa``, ``textgrad``), version, rollouts_to_converge (int or "unknown"),
                      converged_score (score or "unknown"): "unknown" is filled in by `diagnose`
    [[hardware]]      name, exactly one of sim_preset (a simulator preset) or endpoints (a table
                      role|"default" -> {url, model, ...}, as in a run config), gpu_type,
                      gpu_count, shared (whether the optimiser models and the task model share
                      the hardware); at least one class
    [budget]          rollouts, tokens, gpu_seconds, wall_clock_s (the wall-clock deadline of
                      one run, seconds), binding (which of the four binds)
    [eval_set]        dataset, scoring, owner, ever_used_to_tune, and [[eval_set.splits]]
                      each with name (a split spec of the task), role (train, selection or
                      test), rows and sha256 (the content hash the task pins the split by)
    [failure_cost]    sentence (what a wrong answer costs, one sentence) and canary_policy,
                      one of :data:`CANARY_POLICIES`, which that sentence selects
    [claim]           speedup (the speedup claimed over the serial baseline), margin (the test
                      accuracy the claim may lose and still hold, a fraction: 0.02 is 2 points),
                      target_score (score or "unknown": the baseline's plateau minus the margin)

Beyond the fields, a card must be consistent: one split of each role, split hashes equal to the
data's, no example shared by the test split and a train or selection split, and a test split the
task does not itself call anything but test. ``diagnose`` and ``verify`` read the serial
baseline, hardware classes, budget and claim; ``learn --card`` reads the splits, their roles and
the hardware classes (:mod:`combee_fast.verify.discipline`); :func:`release_config` reads the
failure cost's canary policy and the claim's margin for an online learner's release gate.
"""

from __future__ import annotations

import math
import tomllib
import typing
from pathlib import Path
from typing import Any, ClassVar, Literal

import msgspec

from combee_fast.config import RELEASE_POLICIES, EndpointSpec, ReleaseConfig, SessionConfig
from combee_fast.errors import CardError, CombeeError, ConfigError
from combee_fast.files import read_regular
from combee_fast.learners import roles_of, serial_baselines
from combee_fast.redact import escape_control
from combee_fast.sim.latency import PRESETS
from combee_fast.tasks.heldout import SPLIT_ROLES, split_role
from combee_fast.tasks.registry import get_task

UNKNOWN = "unknown"
"""The value of a baseline field that ``diagnose`` has not measured yet."""

Unknown = Literal["unknown"]
Role = Literal["train", "selection", "test"]
Binding = Literal["rollouts", "tokens", "gpu_seconds", "wall_clock_s"]

CANARY_POLICIES = {
    "none": "a wrong answer costs nothing that matters: ship the learned playbook directly",
    "shadow": "a wrong answer costs rework: run the playbook beside the current one, compare, no user sees it",
    "staged": "a wrong answer costs money or trust: serve a small share of traffic first, widen on evidence",
    "hold": "a wrong answer causes harm: a person signs off on held-out evidence before any traffic",
}
"""The canary policies a failure-cost sentence may select, each with what it means."""
CanaryPolicy = Literal["none", "shadow", "staged", "hold"]


class _Table(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """A card table: frozen, no unknown fields, every field named."""


class TaskSpec(_Table, frozen=True, kw_only=True):
    """What is learned and how it is scored."""

    name: str
    options: dict[str, str] = msgspec.field(default_factory=dict)  # the task's options, as in a run config
    input_shape: str
    output_shape: str
    success_metric: str
    baseline_test_score: float | Unknown


class SerialBaseline(_Table, frozen=True):
    """The serial method the claim is measured against; "unknown" values are measured by diagnose."""

    method: str
    version: str
    rollouts_to_converge: int | Unknown
    converged_score: float | Unknown


class HardwareClass(_Table, frozen=True, kw_only=True):
    """One class of hardware the claim must survive: a simulator preset or a set of endpoints."""

    one_of: ClassVar[tuple[str, ...]] = ("sim_preset", "endpoints")  # exactly one is required

    name: str
    sim_preset: str | None = None
    endpoints: dict[str, EndpointSpec] | None = None
    gpu_type: str
    gpu_count: int
    shared: bool  # the optimiser models (reflector, curator, reducer) share the task model's hardware

    def serves(self, config: SessionConfig) -> bool:
        """True when ``config`` runs on this class: the same simulator preset (a simulated run),
        or the same endpoint URL for every role of its learner."""
        roles = roles_of(config)
        if self.sim_preset is not None:
            return all(config.endpoint_for(*role.lookup_keys).url is None for role in roles) and \
                config.sim.preset == self.sim_preset
        mine = SessionConfig(endpoints=self.endpoints or {})
        return all(mine.endpoint_for(*role.lookup_keys).url is not None
                   and mine.endpoint_for(*role.lookup_keys).url == config.endpoint_for(*role.lookup_keys).url
                   for role in roles)


class Budget(_Table, frozen=True):
    """What one run may spend, and which limit binds first."""

    rollouts: int
    tokens: int
    gpu_seconds: float
    wall_clock_s: float
    binding: Binding


class EvalSplit(_Table, frozen=True):
    """One pinned split of the eval set and its role."""

    name: str
    role: Role
    rows: int
    sha256: str


class EvalSet(_Table, frozen=True):
    """The data the claim is scored on, who owns it, and whether it was ever used to tune."""

    dataset: str
    splits: list[EvalSplit]
    scoring: str
    owner: str
    ever_used_to_tune: bool


class FailureCost(_Table, frozen=True):
    """What a wrong answer costs, and the canary policy that cost selects."""

    sentence: str
    canary_policy: CanaryPolicy


class Claim(_Table, frozen=True):
    """What verify must confirm: the speedup, the accuracy it may lose, the target score."""

    speedup: float
    margin: float
    target_score: float | Unknown


class Card(_Table, frozen=True):
    """A whole experiment card (see the module docstring for every field)."""

    name: str
    task: TaskSpec
    serial_baseline: SerialBaseline
    hardware: list[HardwareClass]
    budget: Budget
    eval_set: EvalSet
    failure_cost: FailureCost
    claim: Claim

    def roles(self) -> dict[str, str]:
        """Split name (as written in the card) -> role."""
        return {split.name: split.role for split in self.eval_set.splits}

    def hardware_for(self, config: SessionConfig) -> HardwareClass | None:
        """The card's hardware class ``config`` runs on (the first that :meth:`HardwareClass.serves` it)."""
        return next((hardware for hardware in self.hardware if hardware.serves(config)), None)

    def split_of_role(self, role: str) -> EvalSplit:
        """The card's (only) split of ``role``."""
        return next(split for split in self.eval_set.splits if split.role == role)


def load_card(path: str | Path) -> Card:
    """Read, check and return the card at ``path``; :class:`CardError` lists every problem.

    Checks the fields first (all missing and invalid ones together); only a complete card is
    then checked against the task's data (split hashes, roles, overlap).
    """
    table = read_card_table(path)
    missing, invalid = field_problems(table, Card)
    if missing or invalid:
        raise CardError(str(path), missing, invalid)
    card = msgspec.convert(table, Card)
    invalid = consistency_problems(card)
    if invalid:
        raise CardError(str(path), [], invalid)
    return card


def read_card_table(path: str | Path) -> dict[str, Any]:
    """The raw TOML table of a card; :class:`ConfigError` when it is not readable TOML."""
    try:
        return tomllib.loads(read_regular(path).decode())
    except OSError as exc:
        raise ConfigError(f"card {path}: not a readable TOML file: {exc.strerror or exc}") from None
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"card {path}: not a readable TOML file: {exc}") from None
    except RecursionError:
        raise ConfigError(f"card {path}: not a readable TOML file: its values are nested too deeply") from None


def _blank(value: Any) -> bool:
    return (isinstance(value, str) and not value.strip()) or (isinstance(value, list) and not value)


def _struct_type(tp: Any) -> type[msgspec.Struct] | None:
    return tp if isinstance(tp, type) and issubclass(tp, msgspec.Struct) else None


def _list_item(tp: Any) -> Any:
    return typing.get_args(tp)[0] if typing.get_origin(tp) is list else None


def field_problems(value: Any, tp: Any, path: str = "") -> tuple[list[str], list[str]]:
    """Every missing field and every invalid value of ``value`` read as the card table ``tp``.

    Missing: a required field that is absent, an empty string or an empty list (paths such as
    ``hardware[1].gpu_type``); a missing table or array of tables lists each of its fields
    (``claim.speedup``, ``hardware[0].name``); for a table with a ``one_of`` group none of which
    is given, the group (``hardware[0].sim_preset|endpoints``). Invalid: a value of the wrong
    type or an unknown field.
    """
    missing: list[str] = []
    invalid: list[str] = []
    struct = _struct_type(tp)
    if struct is not None:
        if not isinstance(value, dict):
            return [], [f"{path or 'card'}: expected a table, got {type(value).__name__}"]
        known = {field.encode_name: field for field in msgspec.structs.fields(struct)}
        invalid += [f"{path}{'.' if path else ''}{key}: unknown field" for key in value if key not in known]
        one_of: tuple[str, ...] = getattr(struct, "one_of", ())
        if one_of and all(key not in value or _blank(value[key]) for key in one_of):
            missing.append(f"{path}{'.' if path else ''}{'|'.join(one_of)}")
        for key, field in known.items():
            where = f"{path}{'.' if path else ''}{key}"
            if key not in value or _blank(value[key]):
                if field.required:
                    inner = _struct_type(field.type) or _struct_type(_list_item(field.type))
                    if inner is None:
                        missing.append(where)
                    else:  # name every field of the missing table
                        missing += field_problems({}, inner, where if _struct_type(field.type) else f"{where}[0]")[0]
                continue
            sub_missing, sub_invalid = field_problems(value[key], field.type, where)
            missing += sub_missing
            invalid += sub_invalid
        return missing, invalid
    item = _list_item(tp)
    if item is not None and _struct_type(item) is not None:
        if not isinstance(value, list):
            return [], [f"{path}: expected an array of tables, got {type(value).__name__}"]
        for index, element in enumerate(value):
            sub_missing, sub_invalid = field_problems(element, item, f"{path}[{index}]")
            missing += sub_missing
            invalid += sub_invalid
        return missing, invalid
    try:
        msgspec.convert(value, tp)
    except msgspec.ValidationError as exc:
        invalid.append(f"{path}: {exc}")
    return missing, invalid


def consistency_problems(card: Card) -> list[str]:
    """What a complete card gets wrong about itself or its task's data (empty when nothing)."""
    problems = []
    for index, hardware in enumerate(card.hardware):
        where = f"hardware[{index}] ({hardware.name})"
        if (hardware.sim_preset is None) == (hardware.endpoints is None):
            problems.append(f"{where}: give exactly one of sim_preset or endpoints")
        elif hardware.sim_preset is not None and hardware.sim_preset not in PRESETS:
            problems.append(f"{where}: unknown sim_preset {hardware.sim_preset!r}; known: {', '.join(sorted(PRESETS))}")
        if hardware.gpu_count < 1:
            problems.append(f"{where}: gpu_count must be >= 1, got {hardware.gpu_count}")
    names = [hardware.name for hardware in card.hardware]
    if len(set(names)) != len(names):
        problems.append(f"hardware: names must be unique, got {', '.join(names)}")
    budget = card.budget
    for field in ("rollouts", "tokens", "gpu_seconds", "wall_clock_s"):
        if not getattr(budget, field) > 0:
            problems.append(f"budget.{field} must be > 0, got {getattr(budget, field)}")
    for where, score in (("task.baseline_test_score", card.task.baseline_test_score),
                         ("serial_baseline.converged_score", card.serial_baseline.converged_score),
                         ("claim.target_score", card.claim.target_score)):
        if score != UNKNOWN and not 0.0 <= score <= 1.0:  # type: ignore[operator]
            problems.append(f"{where} must be in [0, 1] or \"unknown\", got {score}")
    rollouts = card.serial_baseline.rollouts_to_converge
    if rollouts != UNKNOWN and rollouts < 1:  # type: ignore[operator]
        problems.append(f"serial_baseline.rollouts_to_converge must be >= 1 or \"unknown\", got {rollouts}")
    if card.serial_baseline.method not in serial_baselines():
        problems.append(f"serial_baseline.method {card.serial_baseline.method!r} is not a serial method a card may "
                        f"name; choose one of: {', '.join(serial_baselines())}")
    if not 0 < card.claim.speedup < math.inf:  # an infinite speedup is no claim a run can confirm
        problems.append(f"claim.speedup must be a finite number > 0, got {card.claim.speedup}")
    if not 0.0 <= card.claim.margin <= 1.0:
        problems.append(f"claim.margin must be in [0, 1], got {card.claim.margin}")
    return problems + split_problems(card)


def split_problems(card: Card) -> list[str]:
    """The eval set against the task's data: one split per role, hashes, roles, no test overlap."""
    splits = card.eval_set.splits
    problems = []
    for role in SPLIT_ROLES:
        count = sum(split.role == role for split in splits)
        if count != 1:
            problems.append(f"eval_set.splits: need exactly one split of role {role}, got {count}")
    split_names = [split.name for split in splits]
    if len(set(split_names)) != len(split_names):
        problems.append(f"eval_set.splits: names must be unique, got {', '.join(split_names)}")
    try:
        task = get_task(card.task.name, **card.task.options)
    except CombeeError as exc:
        return problems + [f"task: {exc}"]
    inputs: dict[str, set[str]] = {}
    for index, split in enumerate(splits):
        where = f"eval_set.splits[{index}] ({split.name})"
        try:
            loaded = task.load(split.name)
        except CombeeError as exc:
            problems.append(f"{where}: {exc}")
            continue
        manifest = loaded.manifest
        if (split.rows, split.sha256) != (manifest.rows, manifest.sha256):
            problems.append(f"{where}: the card pins {split.rows} rows sha256 {split.sha256}, the data has "
                            f"{manifest.rows} rows sha256 {manifest.sha256}")
        if split.role != "test" and split_role(task, split.name) == "test":
            problems.append(f"{where}: task {task.name!r} declares this split test; it cannot be {split.role}")
        inputs[split.name] = {example.input for example in loaded.examples}
    tests = [split.name for split in splits if split.role == "test" and split.name in inputs]
    for split in splits:
        if split.role == "test" or split.name not in inputs:
            continue
        for test in tests:
            shared = len(inputs[split.name] & inputs[test])
            if shared:
                problems.append(f"eval_set.splits: {split.role} split {split.name!r} shares {shared} examples "
                                f"with test split {test!r}")
    return problems


def release_config(card: Card, base: ReleaseConfig | None = None) -> ReleaseConfig:
    """How an online learner releases versions under ``card``: ``base`` (default: the defaults)
    with the canary policy the card's failure cost selects and the card's claim margin."""
    assert set(CANARY_POLICIES) == set(RELEASE_POLICIES)
    return msgspec.structs.replace(base or ReleaseConfig(), policy=card.failure_cost.canary_policy,
                                   margin=card.claim.margin)


def card_summary(card: Card) -> list[str]:
    """A few lines saying what the card pre-registers (what ``combee plan`` prints), its control
    and format characters escaped (:func:`~combee_fast.redact.escape_control`)."""

    def known(value: object) -> str:
        return "unknown (diagnose measures it)" if value == UNKNOWN else str(value)

    task, baseline, budget, evals = card.task, card.serial_baseline, card.budget, card.eval_set
    lines = [
        f"card {card.name}: complete",
        f"task {task.name}: {task.input_shape} -> {task.output_shape}; metric: {task.success_metric}; "
        f"baseline test score {known(task.baseline_test_score)}",
        f"serial baseline: {baseline.method} ({baseline.version}); rollouts to converge "
        f"{known(baseline.rollouts_to_converge)}; converged score {known(baseline.converged_score)}",
    ]
    for hardware in card.hardware:
        where = f"simulator preset {hardware.sim_preset}" if hardware.sim_preset else \
            "endpoints " + ", ".join(f"{role}={spec.url}" for role, spec in (hardware.endpoints or {}).items())
        lines.append(f"hardware {hardware.name}: {where}; {hardware.gpu_count} x {hardware.gpu_type}; "
                     f"optimiser and task models {'share' if hardware.shared else 'do not share'} hardware")
    lines.append(f"budget: {budget.rollouts} rollouts, {budget.tokens} tokens, {budget.gpu_seconds:g} GPU-s, "
                 f"{budget.wall_clock_s:g} s wall clock; binding: {budget.binding}")
    splits = ", ".join(f"{s.name} ({s.role}, {s.rows} rows, sha256 {s.sha256[:12]})" for s in evals.splits)
    lines.append(f"eval set {evals.dataset} (owner {evals.owner}; scoring: {evals.scoring}; "
                 f"{'was' if evals.ever_used_to_tune else 'never'} used to tune): {splits}")
    lines.append(f"failure cost: {card.failure_cost.sentence} -> canary policy {card.failure_cost.canary_policy}: "
                 f"{CANARY_POLICIES[card.failure_cost.canary_policy]}")
    lines.append(f"claim: {card.claim.speedup:g}x over the serial baseline, losing at most "
                 f"{100 * card.claim.margin:g} points on test; target score {known(card.claim.target_score)}")
    lines.append("serial baselines a card may name: "
                 + "; ".join(f"{name} ({runs})" for name, runs in serial_baselines().items()))
    return [escape_control(line) for line in lines]  # a card's text cannot drive the terminal
