"""``--task tau2-retail`` and ``--task tau2-airline``: tau2-bench's domains, from their wheels.

Splits are the domain's ``split_tasks.json`` (pinned by hash with ``tasks.json``,
:data:`~combee_fast.tasks.tau2.domain.PINNED`): ``train`` and ``test`` (report only), and ``selection``
(also named ``val``), the train split under the name runs select on (tau2 has no selection split
of its own; the test split is never selected on). Each example is one tau2 task: its input tells the agent a customer is
waiting (and its case number), ``meta`` holds the task id, the domain's policy (first in the agent's system prompt) and
the task's content hash (rows are compared with the test split by it). There is no target: the
environment (:mod:`.environment`) scores the episode. The task declares the ``user`` role
(:mod:`.user`): the customer its environment calls.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import msgspec

from combee_fast.errors import ConfigError
from combee_fast.protocols.rollouts import Environment
from combee_fast.sandbox.sessions import Sandboxes
from combee_fast.schema import Example
from combee_fast.tasks.base import Score, Split, SplitManifest
from combee_fast.tasks.heldout import CONTENT_META
from combee_fast.tasks.splits import parse_split_spec
from combee_fast.tasks.tau2.domain import Domain, domain
from combee_fast.tasks.tau2.environment import POLICY_META, TASK_META, Tau2Environment
from combee_fast.tasks.tau2.user import USER

INPUT = ("Case {domain}-{case}. You are a customer service agent of the {domain} domain. A customer is talking to "
         "you: help them "
         "within the policy, using the tools. Talk to the customer only with the respond tool; finish when the "
         "conversation is over.")
"""Every example's input (the policy is in the system prompt, the customer's words in the observation)."""

SPLIT_ROLES = {"train": "train", "selection": "selection", "val": "selection", "test": "test"}

STEP_TIMEOUT_S = 30.0
"""Each MCP call's limit (overridden by the ``step_timeout_s`` task option)."""


class Tau2DomainTask:
    """One tau2 domain as a task (module docstring)."""

    def __init__(self, domain_name: str, *, step_timeout_s: str | float = STEP_TIMEOUT_S) -> None:
        self.domain: Domain = domain(domain_name)
        self.name = f"tau2-{domain_name}"
        self.split_roles = SPLIT_ROLES
        self.roles = (USER,)  # the customer, a model role of its own
        self.sim_world = "combee_fast.sim.tau2:tau2_world"
        try:
            self.step_timeout_s = float(step_timeout_s)
        except ValueError:
            self.step_timeout_s = 0.0
        if not 0.0 < self.step_timeout_s < float("inf"):
            raise ConfigError(f"task {self.name}: step_timeout_s must be a number of seconds > 0, got {step_timeout_s!r}")

    def split_names(self) -> tuple[str, ...]:
        return tuple(SPLIT_ROLES)

    def load(self, split: str) -> Split:
        parsed = parse_split_spec(split, task=self.name)
        source_split = "train" if parsed.name in ("selection", "val") else parsed.name
        if parsed.name not in SPLIT_ROLES:
            raise ConfigError(f"task {self.name}: no split {parsed.name!r}; the splits are {', '.join(SPLIT_ROLES)}")
        ids = self.domain.splits[source_split]
        policy = self.domain.policy
        examples = []
        for index, task_id in enumerate(ids):
            task = self.domain.tasks[task_id]
            content = hashlib.sha256(msgspec.json.encode(task)).hexdigest()
            examples.append(Example(index, INPUT.format(domain=self.domain.name, case=task_id), None, parsed.name,
                                    {TASK_META: task_id, POLICY_META: policy, CONTENT_META: content}))
        chosen = examples[parsed.start:parsed.stop]
        digest = hashlib.sha256(msgspec.json.encode([e.meta[CONTENT_META] for e in chosen])).hexdigest()
        source = str(Path(self.domain.folder) / "split_tasks.json")
        return Split(SplitManifest(self.name, split, source, len(chosen), digest), tuple(chosen))

    def rollout_source(self) -> None:
        return None

    def score(self, example: Example, answer: str | None) -> Score:
        """A tau2 task is graded on its episode's final state and messages, never on an answer alone."""
        raise ValueError(f"{self.name} task {example.id} is graded by its environment, not by an answer")

    def environment(self, sandboxes: Sandboxes) -> Environment:
        return Tau2Environment(self.domain, step_timeout_s=self.step_timeout_s)


def retail(**options: str) -> Tau2DomainTask:
    """``--task tau2-retail``."""
    return Tau2DomainTask("retail", **options)


def airline(**options: str) -> Tau2DomainTask:
    """``--task tau2-airline``."""
    return Tau2DomainTask("airline", **options)
