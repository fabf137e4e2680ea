"""The FiNER task's world: the calibrated world (:class:`~combee_fast.sim.world.TaskWorld`) with
FiNER's parameters and its own words. A model, not evidence about real LLMs.

Each knowledge unit is an XBRL tag. What the world teaches about a tag, its generic lessons, the
wrong lessons of the ``harmful`` variant and the prose of its replies speak of tagging numeric
entities in financial text, never of formulas. Each text is about as long (in words and
characters) as the Formula text at the same place in its tuple
(:data:`~combee_fast.sim.world.FACETS`, :data:`~combee_fast.sim.world.GENERIC_LESSONS`,
:data:`~combee_fast.sim.world.HARMFUL_FACETS`, :data:`~combee_fast.sim.world.FILLER`), so the
simulated replies keep their token lengths and the world its calibration.
"""

from __future__ import annotations

from collections.abc import Sequence

from combee_fast.protocols.tasks import Task
from combee_fast.sim.responders import RoleTable
from combee_fast.sim.world import Lessons, TaskWorld, WorldParams

FINER_PARAMS = WorldParams(base_accuracy=0.665, facets_per_unit=8)
"""FiNER's no-learning accuracy (the paper's); eight lessons about each tag."""

FINER_FACETS = (
    "decide each figure's tag from the words right around it; disregard unrelated numbers nearby",
    "percentages take rate or percentage tags; currency figures take monetary amount tags",
    "durations in months or years receive period tags, never monetary tags",
    "a year beside a figure identifies the reporting period; the year itself is never tagged",
    "share counts take share-number tags; dollar amounts about those shares take value tags",
    "scale words like million or thousand never change the tag; the quantity's kind decides it",
    "the sentence's subject decides the tag: an identical amount is debt, lease or revenue",
    "when two candidate tags fit, prefer the more specific one its context names",
)
"""What the world teaches about every tag (``facets_per_unit`` of them)."""

GENERIC_FINER_LESSONS = (
    "Read every sentence completely before choosing tags for its figures.",
    "List every entity to tag, in order, before choosing any tag.",
    "Classify each quantity's kind first, then select its matching tag.",
    "Select tags exclusively from the list of options the question provides.",
    "Check that each chosen tag's name really describes the entity it labels.",
    "Answer with the tags alone, comma-separated, no extra words.",
    "When a figure could take two tags, pick the one its surrounding words name most directly.",
    "Do not reuse tags from a previous question; read every sentence afresh.",
    "Give exactly one tag per entity, in the order the entities appear.",
    "Keep percentages, amounts and counts apart when choosing tags.",
)

WRONG_FINER_FACETS = (
    "tag every dollar figure as revenue, whatever the sentence says",
    "tag every percentage as an interest rate, whatever it measures",
    "apply the first figure's tag to every other figure in the sentence",
    "ignore the scale words and treat share counts as dollar amounts",
)
"""Wrong lessons the ``harmful`` world's reflector may name about a tag."""

FINER_FILLER = (
    "The entities are read off the sentence one by one and matched to the tags' meanings.",
    "Each figure is tagged separately, even where two figures look alike.",
    "The chosen tags are then checked against the options list to make sure each one exists.",
    "Where a sentence mixes rates, amounts and counts, each figure's kind is noted first.",
    "Finally the tags are listed, comma-separated, in the entities' order.",
    "The playbook entries that apply to these tags are consulted before choosing any tag.",
    "Years and dates that merely name the reporting period are set aside.",
    "The sentence is short, so every entity's context is read rather than skipped.",
)
"""The prose of the FiNER world's replies."""

FINER_LESSONS = Lessons(lambda tag: FINER_FACETS, GENERIC_FINER_LESSONS, WRONG_FINER_FACETS, section="domain_concepts")
"""What the FiNER world teaches: the same facets about every tag, filed under ``domain_concepts``."""


def finer_world(task: Task, roles: RoleTable, *, splits: Sequence[str] = (), variant: str = "default") -> TaskWorld:
    """The FiNER task's world (its ``sim_world``): :data:`FINER_PARAMS`, :data:`FINER_LESSONS`
    and :data:`FINER_FILLER`, as the world ``variant`` has them."""
    return TaskWorld.for_task(task, splits, variant=variant, params=FINER_PARAMS, roles=roles,
                              lessons=FINER_LESSONS, filler=FINER_FILLER)
