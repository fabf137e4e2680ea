"""A card with what ``diagnose`` measured written in place of its "unknown" values.

:func:`filled_card` returns the card's TOML text with ``task.baseline_test_score`` (the empty
playbook's test score), ``serial_baseline.rollouts_to_converge``,
``serial_baseline.converged_score`` and ``claim.target_score`` (the converged score minus the
margin) replaced where they read ``"unknown"``; known values, comments and every other line are
kept as written. ``diagnose`` saves it beside its report as ``card.diagnosed.toml``; adopting it
is the card owner's decision, never made for them.
"""

from __future__ import annotations

import re

from combee_fast.verify.card import UNKNOWN
from combee_fast.verify.diagnose import Diagnosis


def measured_values(diagnosis: Diagnosis) -> dict[tuple[str, str], str]:
    """``(table, key) -> TOML value`` for every field ``diagnose`` measures."""
    return {
        ("task", "baseline_test_score"): f"{diagnosis.empty.score.mean:.4f}",
        ("serial_baseline", "rollouts_to_converge"): str(diagnosis.rollouts_to_converge),
        ("serial_baseline", "converged_score"): f"{diagnosis.converged_score:.4f}",
        ("claim", "target_score"): f"{max(0.0, diagnosis.converged_score - diagnosis.margin):.4f}",
    }


def filled_card(text: str, diagnosis: Diagnosis) -> str:
    """``text`` (a card's TOML) with every measured field that reads "unknown" filled in."""
    values = measured_values(diagnosis)
    table = ""
    lines = []
    for line in text.splitlines(keepends=True):
        header = re.match(r"^\s*\[([A-Za-z_.]+)\]\s*(#.*)?$", line)
        if header:
            table = header[1]
        match = re.match(rf'^(\s*([A-Za-z_]+)\s*=\s*)"{UNKNOWN}"(.*)$', line, re.DOTALL)
        if match and (table, match[2]) in values:
            line = f"{match[1]}{values[(table, match[2])]}{match[3]}"
        lines.append(line)
    return "".join(lines)
