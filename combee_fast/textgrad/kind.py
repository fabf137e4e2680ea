"""TextGrad registered as a learner (:class:`~combee_fast.protocols.LearnerKind`): a prompt
variable learned by textual gradients, through the generic methods of :mod:`combee_fast.methods`
over :class:`~combee_fast.textgrad.learner.TextGradLearner`.

Methods: ``sequential`` (shown as ``textgrad``: TextGrad's own loop, one optimizer step per
example), ``naive`` (``naive-textgrad``: one step over a whole batch's gradients, TextGrad's
batched mode) and ``combee`` (``combee-textgrad``: one step per augmented-shuffle group, merged
by the reduce tree): the default methods of a learner (:mod:`combee_fast.kinds`), as are every
member it leaves out. A step's batch is ``train.batch_size`` examples, as for ACE. Its roles are
answered on the simulated endpoint by :mod:`~combee_fast.textgrad.sim`.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from combee_fast.config import SessionConfig
from combee_fast.errors import ConfigError
from combee_fast.methods import build_method
from combee_fast.methods.base import EvalResult
from combee_fast.protocols.learning import LearnContext
from combee_fast.protocols.running import Method
from combee_fast.roles.calls import RoleCalls
from combee_fast.schema import Example
from combee_fast.textgrad.calls import ROLES, TextGradCalls
from combee_fast.textgrad.evaluate import evaluate
from combee_fast.textgrad.learner import TextGradLearner
from combee_fast.textgrad.online import TextGradOnline
from combee_fast.textgrad.sim import RESPONDERS
from combee_fast.textgrad.variable import PromptChange, PromptVariable, is_variable_file


def calls_of(context: LearnContext) -> TextGradCalls:
    """The TextGrad role calls on a session's role calls (seeded, sampled and counted by them:
    ``calls.json``, ``errors.jsonl``), forward passes as its attempts (agent episodes, on a task
    solved by acting)."""
    return TextGradCalls(context.task, context.calls, context.attempts)


class TextGradKind:
    """The TextGrad learner: what it learns and deploys is a
    :class:`~combee_fast.textgrad.variable.PromptVariable`."""

    name = "textgrad"
    roles = ROLES
    size_unit = "lines"  # what the artifact's size counts, in progress lines and reports
    artifact_type = PromptVariable
    responders = RESPONDERS  # how the simulated endpoint answers its roles

    def initial(self, config: SessionConfig) -> PromptVariable:
        return PromptVariable.seed()

    def build_method(self, method: str, context: LearnContext) -> Method[PromptVariable]:
        if context.from_traces:
            raise ConfigError("learner textgrad runs its own forward calls; it cannot learn from collected traces")
        config = context.config
        return build_method(method, TextGradLearner(calls_of(context)), config.map, config.combee, seed=config.seed)

    def load(self, path: str | Path) -> PromptVariable | None:
        return PromptVariable.load(path) if is_variable_file(path) else None

    async def evaluate(self, context: LearnContext, deployable: PromptVariable,
                       examples: Sequence[Example]) -> EvalResult:
        return await evaluate(calls_of(context), deployable, examples, concurrency=context.config.eval.parallel)

    def version_files(self, artifact: PromptVariable) -> list[tuple[str, bytes]]:
        return [(f"prompts/v{artifact.version:05d}.json", artifact.to_bytes())]

    def load_version(self, root: Path, version: int, config: SessionConfig) -> PromptVariable:
        return PromptVariable.load(root / f"prompts/v{version:05d}.json") if version else self.initial(config)

    def lessons(self, artifact: PromptVariable) -> list[str]:
        return [line for _, line in artifact.lines()]

    def summary(self, artifact: PromptVariable) -> dict[str, Any]:
        return {"prompt_lines": len(artifact), "prompt_chars": len(artifact.render())}

    def improvements(self, report: PromptChange) -> tuple[int, int]:
        """An optimizer update that reached the apply is explored, one that changed the prompt
        (a line added or removed) accepted."""
        return 1, int(bool(report.added_ids or report.evicted))

    def online_learner(self, calls: RoleCalls) -> TextGradOnline:
        """The learner of submitted rollouts: loss and gradient per rollout, never a forward again."""
        return TextGradOnline(calls)


TEXTGRAD = TextGradKind()
"""The registered TextGrad learner."""
