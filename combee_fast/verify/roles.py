"""Role separation: which model proposed the edits, which evaluated the rollouts, which serves
the prompt, and a warning when one model both proposes and evaluates.

Every learner's roles say the part they play by their pool (:mod:`combee_fast.roles.spec`):
``propose`` roles write the learned context (ACE's reflector, curator and reducer; GEPA's
proposer and aggregator; TextGrad's gradient), ``evaluate`` roles judge the rollouts (TextGrad's
loss), ``serve`` roles answer with the learned context (ACE's generator, GEPA's solver,
TextGrad's forward). A learner without an ``evaluate`` role has its rollouts evaluated by the
task's scorer, a program, when its proposers get the ground truth; without it
(``use_ground_truth = false``) its first proposer judges the rollouts itself, so the model that
proposes an edit also decides whether the answer that motivated it was wrong.
"""

from __future__ import annotations

from collections.abc import Mapping


def role_separation(models: Mapping[str, str], pools: Mapping[str, str], *, use_ground_truth: bool,
                    scorer: str) -> tuple[list[str], list[str]]:
    """Markdown lines stating who proposed, evaluated and served, and the warnings (may be empty).

    ``models``: role -> "model @ endpoint"; ``pools``: role -> its pool, in the learner's order of
    its roles; ``scorer``: what scores an answer (e.g. the task's success metric).
    """
    def of(pool: str) -> list[str]:
        return [role for role, its in pools.items() if its == pool]

    proposers, evaluators, servers = of("propose"), of("evaluate"), of("serve")
    proposing = {models.get(role, "?") for role in proposers}
    lines = ["| part | who |", "|---|---|", *(f"| proposes edits: {role} | {models.get(role, '?')} |" for role in proposers)]
    warnings = []
    if evaluators:
        lines += [f"| evaluates rollouts: {role} | {models.get(role, '?')} |" for role in evaluators]
        warnings += [f"one model proposes and evaluates: {models.get(role, '?')} judges the rollouts ({role}) and "
                     "proposes the edits they motivate" for role in evaluators if models.get(role, "?") in proposing]
    elif use_ground_truth or not proposers:
        lines.append(f"| evaluates rollouts | the task's scorer ({scorer}), a program |")
    else:
        judge = models.get(proposers[0], "?")
        lines.append(f"| evaluates rollouts | {judge} (the {proposers[0]} judges without ground truth) |")
        warnings.append(f"one model proposes and evaluates: {judge} judges the rollouts (no ground truth) and "
                        "proposes the edits they motivate")
    lines += [f"| serves the prompt: {role} | {models.get(role, '?')} |" for role in servers]
    serving = [models[role] for role in servers if role in models and models[role] in proposing]
    if serving:
        lines += ["", f"Note: the serving model {serving[0]} also proposes edits (self-improvement); its rollouts "
                      "are still scored by the evaluator above."]
    return lines, warnings
