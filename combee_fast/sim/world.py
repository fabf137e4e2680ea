"""The task world: the knowledge a deterministic stand-in for an LLM answers from, and the table
of responders through which it answers, one per request role.

It is a *model of the failure Combee fixes*, not evidence about real LLMs. It reads only what a
real model would see, the prompt (by the tags the role templates use) and the role header, plus
the task's data, which plays the part of the model's world knowledge.

- **Knowledge units** come from the data: one per Formula formula (50 in train), one per FiNER tag.
  Each unit has a few *facets* (distinct lessons about it), so the same unit can yield several
  playbook entries, as real curators write several bullets about one formula. A world speaks in
  its own words (its :class:`Lessons` and the ``filler`` of its replies' prose): Formula's here,
  FiNER's in :mod:`.finer`.
- **Answers**: an answer (a FiNER entity) is right with ``known_accuracy`` when the lessons read
  hold one about its unit (or a retry's reflection names the unit), otherwise with the base
  accuracy (Formula 0.64, FiNER 0.665: the paper's no-learning accuracies) plus a small gain from
  generic lessons (:meth:`TaskWorld.answer`). Draws are seeded by the request seed, so two
  methods that ask the same question in the same epoch and round get the same draw (common
  random numbers).
- **Roles**: :class:`TaskWorld` answers each request by the responder registered for its role
  (:data:`~combee_fast.sim.responders.RoleResponder`) in the table it is given
  (:class:`~combee_fast.sim.responders.RoleTable`): every learner declares its own on its kind
  (``responders``: ACE's in :mod:`combee_fast.ace.sim`, GEPA's in :mod:`combee_fast.gepa.sim`,
  TextGrad's in :mod:`combee_fast.textgrad.sim`), and the learner registry gathers them
  (:func:`combee_fast.learners.role_table`); a world in which the endpoint plays the agent answers
  an agent's turn in any serving role itself (:class:`WorldAgent`).

Calibrated (``python bench/calibrate_world.py``) so that naive batching on Formula train, one epoch,
learns about 264/199/121/97/47/21 entries at batch 1/5/10/20/50/100 (paper Fig. 2).

Opt-in variants (:data:`WORLD_VARIANTS`) change one thing each and leave the default world's
answers as they are:

- **noisy**: real models are stochastic, so a right answer is drawn per call: the generator's draw
  also depends on the lessons in the prompt, so two playbooks that give a question the same
  probability still answer it independently (the default world's common random numbers make
  equal playbooks score identically). The same prompt and seed still give the same answer, so a
  replayed run is unchanged.
- **harmful**: a share (:data:`HARMFUL_SHARE`) of the reflections that name a unit's lesson name a
  wrong one instead (:data:`HARMFUL_FACETS`, numbered after the unit's true facets); while the
  playbook holds a wrong lesson about a unit, the generator is right on it with only
  ``harmful_accuracy``, whatever else the playbook says.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

import msgspec
import orjson

from combee_fast.sim.responders import NO_ROLES, RoleTable, SimReply, SimRequest, example_for_schema, probe_tool_reply
from combee_fast.schema import Example, Message
from combee_fast.protocols.tasks import Task


PAPER_CURATOR_CURVE = ((1, 264 / 500), (5, 199 / 100), (10, 121 / 50), (20, 97 / 25), (50, 47 / 10), (100, 21 / 5))
"""Entries per curator call against reflections per call, from the paper's Fig. 2 (Formula train,
one epoch, naive batching: entries learned / curator calls at batch 1, 5, 10, 20, 50, 100)."""


def curator_output(reflections: int, curve: Sequence[tuple[float, float]]) -> float:
    """Expected ops one curator call writes for ``reflections`` reflections: ``curve``
    interpolated linearly, flat past its last point, proportional below its first."""
    if reflections <= curve[0][0]:
        return curve[0][1] * reflections / curve[0][0]
    for (n0, ops0), (n1, ops1) in zip(curve, curve[1:]):
        if reflections <= n1:
            return ops0 + (ops1 - ops0) * (reflections - n0) / (n1 - n0)
    return curve[-1][1]


class WorldParams(msgspec.Struct, frozen=True):
    base_accuracy: float
    known_accuracy: float = 0.88
    generic_gain: float = 0.02  # added to the base accuracy once `generic_saturation` generic bullets exist
    generic_saturation: int = 8
    facets_per_unit: int = 40
    name_unit_after_wrong: float = 0.95  # P(reflector names a lesson about the unit) after a wrong answer
    name_unit_after_right: float = 0.85  # ... after a right one
    no_ground_truth_factor: float = 0.6  # multiplies both when the reflector gets no ground truth
    curator_curve: tuple[tuple[float, float], ...] = PAPER_CURATOR_CURVE
    reducer_capacity: float = 32.0
    # Mode collapse (off by default): a reflection sampled below this temperature names one and
    # the same lesson whatever the rollout, as a collapsed model repeats its favourite edit.
    collapse_below_temperature: float = 0.0
    informative_reflections: bool = True  # False: every lesson is a content-free note (no unit, no generic gain)
    noisy: bool = False  # True: the generator's draw also depends on the lessons it reads (module docstring)
    harmful_share: float = 0.0  # share of unit lessons that are wrong ones (module docstring)
    harmful_accuracy: float = 0.2  # accuracy on a unit while the playbook holds a wrong lesson about it


WORLD_VARIANTS = ("default", "collapse", "uninformative", "noisy", "harmful")
"""Variants of the task world a simulated run may ask for (``SimConfig.world``): ``default`` is
the calibrated world; ``collapse`` is the default world whose reflections collapse onto one
lesson at temperatures below :data:`COLLAPSE_TEMPERATURE`; ``uninformative`` is the same world
except that the reflector's lessons carry no information (each is a note about no unit and no
generic strategy, so no playbook ever helps the generator): a serial baseline that cannot rise
above the empty playbook; ``noisy`` and ``harmful`` are described in the module docstring.
Variants combine with ``+`` (``noisy+harmful``). Every other parameter is unchanged."""

COLLAPSE_TEMPERATURE = 0.5
HARMFUL_SHARE = 0.08
"""The share of unit lessons that are wrong ones in the ``harmful`` world."""


def world_params(params: WorldParams, variant: str) -> WorldParams:
    """``params`` changed as ``variant`` (one of :data:`WORLD_VARIANTS`, or several joined by
    ``+``) says; ValueError otherwise."""
    for part in variant.split("+"):
        if part == "collapse":
            params = msgspec.structs.replace(params, collapse_below_temperature=COLLAPSE_TEMPERATURE)
        elif part == "uninformative":
            params = msgspec.structs.replace(params, informative_reflections=False)
        elif part == "noisy":
            params = msgspec.structs.replace(params, noisy=True)
        elif part == "harmful":
            params = msgspec.structs.replace(params, harmful_share=HARMFUL_SHARE)
        elif part != "default":
            raise ValueError(f"unknown task-world variant {variant!r}; known: {', '.join(WORLD_VARIANTS)} "
                             "(combine with '+')")
    return params


FORMULA_PARAMS = WorldParams(base_accuracy=0.64)

FACETS = (
    "map each figure in the question to the formula input it stands for; ignore distractor numbers",
    "convert percentages to decimals before substituting and convert back only if asked",
    "keep the formula's sign convention: outflows negative, inflows positive",
    "round only the final result to two decimals; keep full precision in intermediate steps",
    "check the period: annualise or de-annualise rates so every input uses the same period",
    "state the result in the unit the question asks for (ratio, percentage, days, currency)",
    "use averages of opening and closing balances where the formula calls for an average",
    "re-derive the result with a rough estimate to catch an order-of-magnitude slip",
)

GENERIC_LESSONS = (
    "Restate which quantity the question asks for before computing anything.",
    "List every given figure with its unit before choosing a formula.",
    "Write the formula symbolically first, then substitute the numbers.",
    "Prefer the definitions stated in the question over remembered variants.",
    "Check that the answer's magnitude is plausible for the quantity asked.",
    "Answer in exactly the format requested, with no extra words.",
    "When two readings of the question are possible, pick the one the wording states literally.",
    "Do not reuse numbers from a previous question; read every input afresh.",
    "Verify the arithmetic of the final step once more before answering.",
    "Keep units consistent across all inputs before combining them.",
)

HARMFUL_FACETS = (
    "round every input to a whole number before substituting it",
    "treat every percentage as a whole number, never as a decimal",
    "use the closing balance wherever the formula calls for an average",
    "ignore the sign convention and add outflows as positive amounts",
)
"""Wrong lessons the ``harmful`` world's reflector may name about a unit."""

FILLER = (
    "The inputs are read off the question one by one and matched to the formula's terms.",
    "Each intermediate value is kept at full precision until the final step.",
    "The result is then compared with a rough estimate to make sure the magnitude is right.",
    "Where the question mixes periods or units, they are aligned before any arithmetic.",
    "Finally the answer is formatted exactly as the question requests.",
    "The playbook entries that apply to this kind of question are checked before answering.",
    "Distractor figures that the formula does not use are set aside explicitly.",
    "The computation is short, so every step is written out rather than skipped.",
)

_BULLET = re.compile(r"^\[([^\]]+)\] helpful=\d+ harmful=\d+ :: (.*)$", re.MULTILINE)


def tagged(text: str, name: str) -> str | None:
    """What the first ``<name>`` block of ``text`` holds (the tags the role templates use): the
    text after the first ``<name>`` line up to the first ``</name>`` after it, less one newline
    before it; None when it has none. (As the regular expression ``<name>\\n(.*?)\\n?</name>``
    under DOTALL would find it, by two searches.)"""
    opening = f"<{name}>\n"
    start = text.find(opening)
    if start < 0:
        return None
    start += len(opening)
    end = text.find(f"</{name}>", start)
    if end < 0:
        return None
    return text[start:end - 1] if end > start and text[end - 1] == "\n" else text[start:end]


def uniform(*parts: object) -> float:
    """A draw in [0, 1) keyed by ``parts`` (the same parts, the same draw)."""
    digest = hashlib.blake2b(repr(parts).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") / 2**64


def prose(sentences: int, *seed: object, filler: Sequence[str] = FILLER, key: str = "prose") -> str:
    """``sentences`` consecutive sentences of ``filler`` (default: Formula's), the first picked by
    ``seed`` under ``key`` (the same draw whatever the filler): the length of a real reply."""
    start = int(uniform(key, *seed) * len(filler))
    return " ".join(filler[(start + i) % len(filler)] for i in range(sentences))


@dataclass(frozen=True)
class Lessons:
    """What a world teaches, in its own words: ``facets(unit)``, the texts of each unit's facets;
    ``generic``, its generic strategies; ``wrong``, the wrong lessons the ``harmful`` variant's
    reflections may name about a unit (none: a world that names no wrong lesson); ``section``, the
    playbook section a curator files a unit's lessons under (generic ones go under
    ``strategies_and_hard_rules``). Every lesson is written ``<unit> — lesson <k>: <text>``, as
    :func:`lesson_unit` and :func:`lesson_key` read it."""

    facets: Callable[[str], Sequence[str]]
    generic: Sequence[str]
    wrong: Sequence[str] = ()
    section: str = "formulas_and_calculations"

    def about(self, unit: str, facet: int) -> str:
        """The ``facet``-th lesson about ``unit`` (its facets' texts taken in turn)."""
        texts = self.facets(unit)
        return f"{unit} — lesson {facet + 1}: {texts[facet % len(texts)]}."

    def general(self, index: int) -> str:
        """The ``index``-th generic lesson."""
        return f"General — lesson {index + 1}: {self.generic[index % len(self.generic)]}"

    def wrong_about(self, unit: str, index: int, facets_per_unit: int) -> str:
        """A wrong lesson about ``unit``, numbered after its ``facets_per_unit`` true ones."""
        return f"{unit} — lesson {facets_per_unit + index + 1}: {self.wrong[index % len(self.wrong)]}."

    def is_wrong(self, text: str) -> bool:
        """Whether a lesson or bullet states one of the wrong lessons."""
        return any(facet in text for facet in self.wrong)


FORMULA_LESSONS = Lessons(lambda unit: FACETS, GENERIC_LESSONS, HARMFUL_FACETS)
"""The calibrated world's lessons (Formula's): every unit has the same facets."""


def specific_lesson(unit: str, facet: int) -> str:
    """The calibrated world's ``facet``-th lesson about ``unit``."""
    return FORMULA_LESSONS.about(unit, facet)


def generic_lesson(index: int) -> str:
    """The calibrated world's ``index``-th generic lesson."""
    return FORMULA_LESSONS.general(index)


def harmful_lesson(unit: str, index: int, facets_per_unit: int) -> str:
    """A wrong lesson of the calibrated world about ``unit``, numbered after its ``facets_per_unit`` true ones."""
    return FORMULA_LESSONS.wrong_about(unit, index, facets_per_unit)


def is_harmful(text: str) -> bool:
    """Whether a lesson or bullet states one of the calibrated world's wrong lessons."""
    return FORMULA_LESSONS.is_wrong(text)


def noise_lesson(index: int) -> str:
    """A lesson that carries no information: about no unit, and no generic strategy."""
    return f"Note — lesson {index + 1}: this question was read and answered."


def lesson_unit(text: str) -> str | None:
    """The unit a lesson or bullet is about ("General" for generic ones): the text of its first
    line before the first " — " (at least one character); None if neither."""
    end = text.find(" — ", 1)
    return None if end < 0 or "\n" in text[:end] else text[:end]


def lesson_key(text: str) -> str | None:
    """A lesson's identity: its unit and lesson number ("Current Ratio — lesson 3")."""
    head = text.split(":", 1)[0]
    return head if " — lesson " in head else None


@dataclass(frozen=True)
class EpisodeWords:
    """How a world speaks of its episodes: ``thing``, what one works on (``task``, ``case``);
    ``outcomes``, how one ended (not done, done); ``cause``, why one failed and ``remedy``, what to
    do next time (each with ``{unit}``, the unit in lower case); ``result``, what an attempt left
    behind, as a critique names it; and ``filler``, its own sentences of prose, drawn under
    ``filler_key`` (:meth:`prose`)."""

    thing: str
    outcomes: tuple[str, str]
    cause: str
    remedy: str
    result: str
    filler: tuple[str, ...]
    filler_key: str

    def prose(self, sentences: int, *seed: object) -> str:
        """``sentences`` of the world's filler, picked by ``seed``: the length of a real reply."""
        return prose(sentences, *seed, filler=self.filler, key=self.filler_key)


class WorldAgent(Protocol):
    """The agent a world in which the endpoint plays the agent (a task solved by acting) plays
    in every serving role, whichever learner's it is (:meth:`TaskWorld.respond`); its ``words``
    are how the world speaks of its episodes (:mod:`.agent_world` holds what such agents share)."""

    words: EpisodeWords

    def turn(self, world: TaskWorld, request: SimRequest) -> str | SimReply | None:
        """The agent's reply when ``request`` is one of its turns; None when it is not (the
        serving role's own responder answers it then)."""
        ...


class Question(msgspec.Struct, frozen=True):
    """One example as the world knows it: the example and its knowledge units (one per graded
    entity: the formula, or each FiNER tag; a chore's family)."""

    example: Example
    units: tuple[str, ...]


class TaskWorld:
    """A :class:`combee_fast.sim.server.Responder` for one task's examples: the knowledge (the
    task, its questions and their units, the parameters, the draws, its ``lessons``) and a table
    of responders, one per request role (``roles``, :class:`~.responders.RoleTable`: the learners'
    from their registry, :func:`combee_fast.learners.role_table`; default: none). A request is
    answered by its role's responder, called with this world; in a world with an ``agent`` (a
    task solved by acting), a request of a serving role (pool ``serve``) that is an agent's turn
    is the agent's to answer (:meth:`respond`). ``units`` gives each example's knowledge units
    (default: its formula, its FiNER tags, else its target); ``filler``, the sentences of its
    replies' prose (:meth:`prose`)."""

    def __init__(self, task: Task, examples: Iterable[Example], params: WorldParams, *,
                 roles: RoleTable = NO_ROLES, units: Callable[[Example], tuple[str, ...]] | None = None,
                 lessons: Lessons = FORMULA_LESSONS, filler: Sequence[str] = FILLER,
                 agent: WorldAgent | None = None) -> None:
        self.task = task
        self.params = params
        self.lessons = lessons
        self.filler = tuple(filler)
        self.agent = agent
        self.roles = dict(roles.responders)
        self.serving = roles.serving
        self._units_of = units or _units
        self._questions: dict[str, Question] = {}
        for example in examples:
            self._questions[example.input.strip()] = Question(example, self._units_of(example))
        self._all_units = sorted({u for q in self._questions.values() for u in q.units})

    @classmethod
    def for_task(cls, task: Task, splits: Sequence[str] = (), *, variant: str = "default",
                 params: WorldParams = FORMULA_PARAMS, roles: RoleTable = NO_ROLES,
                 lessons: Lessons = FORMULA_LESSONS, filler: Sequence[str] = FILLER) -> TaskWorld:
        """The world of ``task`` knowing the examples of ``splits`` (default: all of them), with
        ``params`` as the world ``variant`` (:data:`WORLD_VARIANTS`) has them, answering ``roles``,
        speaking in ``lessons`` and ``filler``."""
        examples = [e for s in (splits or task.split_names()) for e in task.load(s).examples]
        return cls(task, examples, world_params(params, variant), roles=roles, lessons=lessons, filler=filler)

    def prose(self, sentences: int, *seed: object) -> str:
        """``sentences`` sentences of this world's filler, picked by ``seed`` (:func:`prose`'s draw)."""
        return prose(sentences, *seed, filler=self.filler)

    def states_lesson(self, text: str) -> bool:
        """Whether ``text`` states one of this world's lessons: a lesson about one of its units, or
        one of its generic lessons."""
        return (any(f"{unit} — lesson " in text for unit in self._all_units)
                or any(lesson in text for lesson in self.lessons.generic))

    def plays(self) -> tuple[str, ...]:
        """The request roles this world answers as their learner's model would."""
        return tuple(sorted(self.roles))

    def knows(self, question: str) -> bool:
        """Whether ``question`` (an example's input, stripped) is one of this world's."""
        return question in self._questions

    def question(self, text: str | None) -> Question | None:
        """The question whose input is ``text`` (stripped); None for one the world does not know."""
        return self._questions.get(text.strip()) if text is not None else None

    def respond(self, request: SimRequest) -> str | SimReply:
        """The agent's turn, when this world has an agent and the request is one of its turns in
        a serving role; else the answer of the request's role's responder. A role no responder
        plays (e.g. the start-up probe): a call of the first tool offered, else an object the
        schema allows, else an error object."""
        if self.agent is not None and request.role in self.serving:
            turn = self.agent.turn(self, request)
            if turn is not None:
                return turn
        responder = self.roles.get(request.role)
        if responder is not None:
            return responder(self, request)
        if request.tools:
            return probe_tool_reply(request)
        if request.json_schema is not None:
            return orjson.dumps(example_for_schema(request.json_schema, request.role)).decode()
        return orjson.dumps({"error": f"the task world plays no role {request.role!r}"}).decode()

    # -- judging and teaching ------------------------------------------------------------------

    def verdict(self, question: Question, answer: str, reported: bool) -> tuple[bool, str]:
        """Whether an attempt at ``question`` was right, and the unit a lesson from it is about:
        ``answer`` graded by the task (the unit: the first it gets wrong, else its first); for a
        question without a target (a chore, a case, a collected trace) the outcome its prompt
        ``reported`` (its first unit)."""
        if question.example.target is None:
            return reported, question.units[0]
        right = self.task.score(question.example, answer).value >= 1.0
        return right, (self.wrong_units(question, answer) or list(question.units))[0]

    def named_lesson(self, unit: str, names_unit: bool, text: str, seed: int) -> str:
        """The lesson an attempt at the question ``text`` teaches, drawn by ``seed``: one of the
        unit's facets when ``names_unit`` (in the ``harmful`` world a wrong one for
        ``harmful_share`` of those, when this world has wrong lessons), else a generic lesson."""
        params, lessons = self.params, self.lessons
        if names_unit and params.harmful_share and lessons.wrong and uniform("harm", seed, text) < params.harmful_share:
            wrong = int(uniform("harm-facet", seed, text) * len(lessons.wrong))
            return lessons.wrong_about(unit, wrong, params.facets_per_unit)
        if names_unit:
            return lessons.about(unit, int(uniform("facet", seed, text) * params.facets_per_unit))
        return lessons.general(int(uniform("generic", seed, text) * len(lessons.generic)))

    # -- answers -------------------------------------------------------------------------------

    def answer(
        self, question: Question, bullets: Sequence[tuple[str, str]], reflection: str, seed: int
    ) -> dict[str, object]:
        """The generator's reply to ``question`` given the lessons it reads, as ``(id, text)``
        pairs, and a retry's reflection text: right with ``known_accuracy`` for a unit some
        lesson (or the reflection) is about, else with the base accuracy plus the generic gain
        (with ``harmful_accuracy`` while a wrong lesson about the unit is held)."""
        generic = [bid for bid, content in bullets if lesson_unit(content) == "General"]
        lessons = _lessons_digest(bullets) if self.params.noisy else None
        answers, cited = [], list(generic[:2])
        for position, unit in enumerate(question.units):
            unit_bullets = [bid for bid, content in bullets if lesson_unit(content) == unit]
            cited.extend(unit_bullets[:2])
            draw = uniform("generate", seed, question.example.input, position) if lessons is None else \
                uniform("generate", seed, question.example.input, position, lessons)
            right = draw < self.unit_accuracy(unit, bullets, reflection, generic=len(generic))
            answers.append(self.truth(question, position) if right else self.wrong(question, position))
        return {
            "reasoning": f"The question asks for {', '.join(dict.fromkeys(question.units))}. "
            + self.prose(6, "generate", seed),
            "bullet_ids": cited,
            "final_answer": ",".join(answers),
        }

    def unit_accuracy(self, unit: str, bullets: Sequence[tuple[str, str]], reflection: str = "", *,
                      generic: int | None = None) -> float:
        """The probability that the generator gets ``unit`` right reading ``bullets`` (``(id,
        text)`` pairs) and a retry's ``reflection``; ``generic``: the generic bullets among them."""
        if generic is None:
            generic = sum(lesson_unit(content) == "General" for _, content in bullets)
        unit_lessons = [content for _, content in bullets if lesson_unit(content) == unit]
        if self.params.harmful_share and any(self.lessons.is_wrong(content) for content in unit_lessons):
            return self.params.harmful_accuracy
        if unit_lessons or f"{unit} — " in reflection:
            return self.params.known_accuracy
        return self.base_accuracy(generic)

    def base_accuracy(self, generic: int) -> float:
        """The probability of a right answer on a unit no lesson is about, with ``generic``
        generic lessons read: the base accuracy plus their (saturating) gain."""
        return self.params.base_accuracy + self.params.generic_gain * min(1.0, generic / self.params.generic_saturation)

    def expected_accuracy(self, playbook_text: str, examples: Iterable[Example]) -> float:
        """The generator's expected accuracy on ``examples`` with ``playbook_text`` as its
        playbook (each example right when every one of its units is): the truth a release test
        estimates, known exactly here because this world is a model."""
        bullets = playbook_bullets(playbook_text)
        generic = sum(lesson_unit(content) == "General" for _, content in bullets)
        chances = []
        for example in examples:
            chance = 1.0
            for unit in self._units_of(example):
                chance *= self.unit_accuracy(unit, bullets, generic=generic)
            chances.append(chance)
        return sum(chances) / len(chances) if chances else 0.0

    def truth(self, question: Question, position: int) -> str:
        """The right answer for the question's ``position``-th entity."""
        target = question.example.target or ""
        return target.split(",")[position].strip() if len(question.units) > 1 else target

    def wrong(self, question: Question, position: int) -> str:
        """A plausible wrong answer for the question's ``position``-th entity."""
        truth = self.truth(question, position)
        if len(question.units) > 1:
            pick = int(uniform("confuse", truth) * len(self._all_units))
            other = self._all_units[pick]
            return other if other != truth else self._all_units[(pick + 1) % len(self._all_units)]
        try:
            return f"{float(truth) * 1.1 + 0.37:.2f}"
        except ValueError:
            return truth + " (unsure)"

    def entity_right(self, question: Question, answer: str, position: int) -> bool:
        """Whether ``answer`` gets the question's ``position``-th entity right."""
        if len(question.units) == 1:
            return self.task.score(question.example, answer).value >= 1.0
        parts = [p.strip() for p in answer.split(",")]
        return position < len(parts) and parts[position] == self.truth(question, position)

    def wrong_units(self, question: Question, answer: str) -> list[str]:
        """The units ``answer`` gets wrong, in order."""
        return [u for i, u in enumerate(question.units) if not self.entity_right(question, answer, i)]


def seed_of(request: SimRequest) -> int:
    """The request's seed (0 when it sent none): what a responder's draws are keyed by."""
    return request.seed if request.seed is not None else 0


def json_reply(obj: object) -> str:
    """A responder's JSON reply."""
    return orjson.dumps(obj).decode()


def _units(example: Example) -> tuple[str, ...]:
    if "formula" in example.meta:
        return (example.meta["formula"],)
    if "tags" in example.meta:
        return tuple(t.strip() for t in example.meta["tags"].split(","))
    return (example.target or "",)


def playbook_bullets(playbook_text: str) -> list[tuple[str, str]]:
    """The ``(id, content)`` of every bullet of a rendered playbook."""
    return [(m[1], m[2]) for m in _BULLET.finditer(playbook_text)]


def _lessons_digest(bullets: Sequence[tuple[str, str]]) -> str:
    """A short name of the lessons a prompt holds (what the ``noisy`` world's draw depends on)."""
    return hashlib.blake2b("\n".join(content for _, content in bullets).encode(), digest_size=8).hexdigest()


def json_lines(text: str) -> list[dict]:
    """The JSON objects of ``text``, one a line (other lines passed over)."""
    rows = []
    for line in text.splitlines():
        try:
            value = orjson.loads(line)
        except orjson.JSONDecodeError:
            continue
        if isinstance(value, dict):
            rows.append(value)
    return rows


def fresh_lessons(lessons: Iterable[str], held: set[str | None]) -> list[str]:
    """Distinct lessons (by key) not already held, in first-seen order."""
    seen: dict[str, str] = {}
    for text in lessons:
        key = lesson_key(text)
        if key is not None and key not in held:
            seen.setdefault(key, text)
    return list(seen.values())


def prompt_of(messages: Sequence[Message]) -> str:
    """The prompt a conversation asks about: the last message before the first assistant reply
    (a repair request restates no question; it asks to answer the earlier prompt again)."""
    for index, message in enumerate(messages):
        if message.role == "assistant":
            return messages[index - 1].content if index else ""
    return messages[-1].content if messages else ""
