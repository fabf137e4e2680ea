"""Role separation: which model proposed the edits, which evaluated the rollouts, which serves
the prompt, and a warning when one model both proposes and evaluates.

Proposers are the reflector, curator and reducer (they write the playbook). The rollouts are
evaluated by the task's scorer, a program, when the reflector gets the ground truth; without it
(``use_ground_truth = false``) the reflector judges the rollouts itself, so the model that
proposes an edit also decides whether the answer that motivated it was wrong. The generator
serves the prompt (the learned playbook is its context).
"""

from __future__ import annotations

from collections.abc import Mapping

PROPOSERS = ("reflector", "curator", "reducer")


def role_separation(models: Mapping[str, str], *, use_ground_truth: bool, scorer: str) -> tuple[list[str], list[str]]:
    """Markdown lines stating who proposed, evaluated and served, and the warnings (may be empty).

    ``models``: role -> "model @ endpoint"; ``scorer``: what scores an answer (e.g. the task's
    success metric).
    """
    proposers = sorted({models[role] for role in PROPOSERS if role in models})
    evaluator = f"the task's scorer ({scorer}), a program" if use_ground_truth else \
        f"{models.get('reflector', '?')} (the reflector judges without ground truth)"
    lines = [
        "| part | who |",
        "|---|---|",
        *(f"| proposes edits: {role} | {models.get(role, '?')} |" for role in PROPOSERS),
        f"| evaluates rollouts | {evaluator} |",
        f"| serves the prompt: generator | {models.get('generator', '?')} |",
    ]
    warnings = []
    if not use_ground_truth:
        warnings.append(f"one model proposes and evaluates: {models.get('reflector', '?')} judges the rollouts "
                        "(no ground truth) and proposes the edits they motivate")
    if models.get("generator") in proposers:
        lines.append("")
        lines.append(f"Note: the serving model {models.get('generator')} also proposes edits (self-improvement); "
                     "its rollouts are still scored by the evaluator above.")
    return lines, warnings
