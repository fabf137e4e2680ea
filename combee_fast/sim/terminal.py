"""The terminal task's world: the simulated endpoint plays the agent. A model, not evidence about
real LLMs.

:func:`terminal_world` is the :class:`~combee_fast.sim.world.TaskWorld` whose knowledge units are
the chore families of :mod:`combee_fast.tasks.terminal.families`, with every built-in role
answered as in the default world (curator, reducer, GEPA's aggregator, TextGrad's step and
reduce: they read lessons, not chores; the curator overloads along the calibrated curve) and
these registered over them:

- **the agent**: a turn of the built-in ReAct agent, made as whichever role serves the learned
  context (ACE's ``generator``, GEPA's ``gepa_solver``, TextGrad's ``textgrad_forward``): the
  learned context is in the system message (ACE's ``<playbook>``, or the ``<instructions>`` of a
  learner whose context has no citable parts), the chore in the first user message's ``<task>``;
  tool calls or JSON actions alike. A request of those roles that is no agent turn is answered
  as the default world answers it. The agent's first turn inspects the working directory; on
  its second it decides, once per episode, whether it knows the chore's family. It does when a
  line of the context states a lesson about the family, found by its text as a model would find
  it (it names the family, or says what one of the family's lessons says; ACE's bullets or plain
  lines alike), or the retry's reflection names it: then with probability ``known_accuracy``;
  otherwise with ``base_accuracy`` (plus the generic lessons' small gain). Knowing it, it issues
  the oracle's commands one per turn; not knowing it, one of the family's plausible mistakes.
  Then it finishes (citing the playbook entries it used, when the context has citable parts).
  A user's own agent asking in a plain prompt (no context block in a system message, no tools,
  no schema) that names a chore gets one shell line: the commands its path would issue, joined
  by ``&&`` (the path decided the same way, from the lessons the prompt's other lines state).
  The commands really run in the sandbox and the chore's real checks decide success. Which path
  a later turn is on is read back from the commands already in the conversation.
- **the reflector** (ACE): reads the outcome the prompt reports (the checks decided it), and names
  a lesson about the chore's family (one of the family's own lessons) with the default world's
  probabilities, else a generic lesson.
- **GEPA's proposer**: as the default world's (:class:`~combee_fast.sim.instructions.Proposer`),
  each example judged by the score its row reports (the checks decided it), the lesson named one
  of the family's own.
- **TextGrad's loss and gradient**: as the default world's (:class:`~combee_fast.sim.textgrad.Loss`,
  :class:`~combee_fast.sim.textgrad.Gradient`), the attempt judged by the reward its prompt
  reports, the gradient's line one of the family's own lessons.

``base_accuracy`` is 0.322: the no-learning success rate on Terminal-Bench 2.0 that the Combee
paper (arXiv 2604.04247) reports for its agent before any prompt learning. Every other parameter
is the default world's.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import msgspec
import orjson

from combee_fast.protocols.tasks import Task
from combee_fast.roles.names import GEPA_PROPOSER_ROLE, GEPA_SOLVER_ROLE, TEXTGRAD_FORWARD_ROLE, TEXTGRAD_GRADIENT_ROLE
from combee_fast.roles.names import TEXTGRAD_LOSS_ROLE
from combee_fast.schema import Example, Message, ToolCall
from combee_fast.sim.ace import reflection_reply
from combee_fast.sim.instructions import Proposer
from combee_fast.sim.responders import RoleResponder, SimReply, SimRequest
from combee_fast.sim.textgrad import Gradient, Loss
from combee_fast.sim.world import (
    Question, TaskWorld, WorldParams, json_reply, lesson_unit, noise_lesson, playbook_bullets, seed_of, tagged,
    uniform, world_params,
)
from combee_fast.tasks.terminal.chores import Chore
from combee_fast.tasks.terminal.families import BY_KEY, Family

TERMINAL_PARAMS = WorldParams(base_accuracy=0.322, facets_per_unit=2)
"""The terminal world: Terminal-Bench 2.0's no-learning success rate (module docstring); each
family has two lessons."""

GENERIC_TERMINAL_LESSONS = (
    "Look at the files with ls and head before changing anything.",
    "Write results to exactly the file the task names, and nothing else.",
    "Check the result file once it is written (cat it, or count its lines).",
    "Quote file names and patterns so the shell does not expand them.",
    "Prefer one clear command per step over a long pipeline you cannot check.",
    "Keep the original order of lines unless the task asks for sorting.",
)

TERMINAL_FILLER = (
    "The files are listed first, so nothing is changed blindly.",
    "The command writes its result to the file the task names.",
    "The output is checked against what the task asks for.",
    "Each step is one command whose result can be read before the next.",
    "File names are quoted where they could be expanded by the shell.",
    "The working directory holds everything the task needs.",
)

INSPECT = "ls -AgG --time-style=+"
"""The first turn's look at the working directory: names, sizes and modes, not owners or times.
Those differ from run to run (each sandbox's uid, the clock the set-up files' ages are counted
from), and what a turn sees is in the next turn's request: a replayed run must see what the
recorded one saw."""

SERVING_ROLES = ("generator", GEPA_SOLVER_ROLE, TEXTGRAD_FORWARD_ROLE)
"""The built-in learners' serving roles: the agent's turns are made as one of them."""

_OUTCOME = re.compile(r"^Outcome: (correct|incorrect)", re.MULTILINE)
_REWARD = re.compile(r"^Reward: ([0-9.]+)", re.MULTILINE)
_BY_NAME = {family.name: family for family in BY_KEY.values()}


def _prose(sentences: int, *seed: object) -> str:
    start = int(uniform("terminal-prose", *seed) * len(TERMINAL_FILLER))
    return " ".join(TERMINAL_FILLER[(start + i) % len(TERMINAL_FILLER)] for i in range(sentences))


def family_lesson(name: str, lessons: Sequence[str], facet: int) -> str:
    return f"{name} — lesson {facet + 1}: {lessons[facet % len(lessons)]}."


def generic_terminal_lesson(index: int) -> str:
    return f"General — lesson {index + 1}: {GENERIC_TERMINAL_LESSONS[index % len(GENERIC_TERMINAL_LESSONS)]}"


def _commands(messages: Sequence[Message]) -> list[str]:
    """The ``run`` commands the agent's earlier turns issued, in order."""
    found = []
    for message in messages:
        if message.role != "assistant":
            continue
        calls = [(c.name, c.arguments) for c in message.tool_calls]
        if not calls:
            try:
                reply = orjson.loads(message.content)
            except orjson.JSONDecodeError:
                continue
            if isinstance(reply, dict):
                calls = [(str(reply.get("tool")), orjson.dumps(reply.get("arguments", {})).decode())]
        for name, arguments in calls:
            if name == "run":
                try:
                    command = orjson.loads(arguments).get("command")
                except (orjson.JSONDecodeError, AttributeError):
                    command = None
                if isinstance(command, str):
                    found.append(command)
    return found


# -- the learned context, as the agent reads it ----------------------------------------------------


def _system(request: SimRequest) -> str | None:
    """The system message of an agent turn (one holding a learned context block); None otherwise."""
    return next((m.content for m in request.messages if m.role == "system"
                 and ("<playbook>" in m.content or "<instructions>" in m.content)), None)


def context_lines(system: str) -> tuple[list[tuple[str | None, str]], bool]:
    """Each line of the learned context in an agent's system prompt, as ``(id, text)`` (``id``: a
    playbook entry's, None for a line that is no entry), and whether its parts are citable (ACE's
    ``<playbook>``; else the ``<instructions>`` block, its ``- `` bullets stripped)."""
    playbook = tagged(system, "playbook")
    block, citable = (playbook, True) if playbook is not None else (tagged(system, "instructions") or "", False)
    lines: list[tuple[str | None, str]] = []
    for line in block.splitlines():
        entry = playbook_bullets(line)
        if entry:
            lines.append(entry[0])
        elif line.strip():
            lines.append((None, line.strip().removeprefix("- ").removeprefix("* ").strip()))
    return lines, citable


def states_lesson_of(text: str, family: Family) -> bool:
    """Whether a line of the context states a lesson about ``family``: it names the family, or it
    says what one of the family's lessons says."""
    return lesson_unit(text) == family.name or any(lesson in text for lesson in family.lessons)


def is_generic(text: str) -> bool:
    """Whether a line of the context states a generic lesson (by its name or its text)."""
    return lesson_unit(text) == "General" or any(lesson in text for lesson in GENERIC_TERMINAL_LESSONS)


class Agent:
    """The agent's turns (module docstring) on the chores ``chores`` (by instruction): a
    responder of a serving role, :meth:`serving` wraps the role's default one."""

    def __init__(self, chores: dict[str, Chore]) -> None:
        self.chores = chores

    def serving(self, otherwise: RoleResponder) -> RoleResponder:
        """A responder that plays the agent's turns and answers other requests by ``otherwise``."""

        def respond(world: TaskWorld, request: SimRequest) -> str | SimReply:
            system = _system(request)
            if system is not None:
                return self.act(world, request, system)
            plain = self.plain(world, request)
            return plain if plain is not None else otherwise(world, request)

        return respond

    def plain(self, world: TaskWorld, request: SimRequest) -> str | None:
        """The reply to a plain prompt of a user's own agent (no system context block, no tools,
        no schema) naming one of the chores: one shell line, the episode's commands joined by
        ``&&``, its path decided as a ReAct agent's is, from the lessons the prompt's other lines
        state; None for any other request."""
        if request.tools or request.json_schema is not None:
            return None
        text = next((m.content for m in reversed(request.messages) if m.role == "user"), "")
        instruction = next((known for known in self.chores if known and known in text), None)
        if instruction is None:
            return None
        chore = self.chores[instruction]
        family = BY_KEY[chore.family]
        rest = text.replace(instruction, "\n")
        lines: list[tuple[str | None, str]] = [entry[0] if (entry := playbook_bullets(line)) else (None, line.strip())
                                               for line in rest.splitlines() if line.strip()]
        about = [(bid, line) for bid, line in lines if states_lesson_of(line, family)]
        path = self._path(world, chore, [], about, lines, family.name, "", seed_of(request), instruction)
        return " && ".join(path or chore.oracle)

    def act(self, world: TaskWorld, request: SimRequest, system: str) -> str | SimReply:
        first = next((m.content for m in request.messages if m.role == "user"), "")
        instruction = (tagged(first, "task") or "").strip()
        chore = self.chores.get(instruction)
        seed = seed_of(request)
        lines, citable = context_lines(system)
        if chore is None:
            return _reply(request, "finish", {"answer": "I do not know this task."}, "The task is unknown to me.")
        issued = _commands(request.messages)
        family = BY_KEY[chore.family]
        about = [(bid, text) for bid, text in lines if states_lesson_of(text, family)]
        if not issued:
            return _reply(request, "run", {"command": INSPECT}, "First, a look at the working directory.")
        path = self._path(world, chore, issued[1:], about, lines, family.name, tagged(first, "reflection") or "",
                          seed, instruction)
        done = len(issued) - 1
        if path is None or done >= len(path):
            finish: dict[str, object] = {"answer": "done"}
            if citable:
                generic = [bid for bid, text in lines if bid is not None and is_generic(text)][:2]
                finish["bullet_ids"] = [bid for bid, _ in about if bid is not None][:2] + generic
            return _reply(request, "finish", finish, "The result is in place. " + _prose(1, "finish", seed))
        thought = f"The next step for this {family.name.lower()} chore. " + _prose(2, "act", seed, done)
        return _reply(request, "run", {"command": path[done]}, thought)

    @staticmethod
    def _path(world: TaskWorld, chore: Chore, issued: list[str], about: list[tuple[str | None, str]],
              lines: list[tuple[str | None, str]], unit: str, reflection: str, seed: int,
              instruction: str) -> tuple[str, ...] | None:
        """The commands this episode issues: decided on its first acting turn, read back after."""
        paths = [chore.oracle, *chore.mistakes]
        if issued:
            return next((p for p in paths if tuple(issued) == p[:len(issued)]), None)
        known = bool(about) or f"{unit} — " in reflection
        base = world.base_accuracy(sum(1 for _, text in lines if is_generic(text)))
        if uniform("act", seed, instruction) < (world.params.known_accuracy if known else base):
            return chore.oracle
        return chore.mistakes[int(uniform("mistake", seed, instruction) * len(chore.mistakes))]


def _reply(request: SimRequest, tool: str, arguments: dict[str, object], thought: str) -> str | SimReply:
    if request.tools:
        return SimReply(thought, (ToolCall(tool, msgspec.json.encode(arguments).decode()),))
    return orjson.dumps({"thought": thought, "tool": tool, "arguments": arguments}).decode()


# -- the learning roles ----------------------------------------------------------------------------


def family_namer(world: TaskWorld, unit: str, names_unit: bool, text: str, seed: int) -> str:
    """One of the family's own lessons (when the draw names it), else a generic terminal lesson."""
    if names_unit:
        facet = int(uniform("facet", seed, text) * world.params.facets_per_unit)
        return family_lesson(unit, _BY_NAME[unit].lessons, facet)
    return generic_terminal_lesson(int(uniform("generic", seed, text) * len(GENERIC_TERMINAL_LESSONS)))


def row_judge(world: TaskWorld, question: Question, row: dict[str, object]) -> tuple[bool, str]:
    """A graded row judged by the score it reports (the checks decided it); the chore's family."""
    score = row.get("score")
    return isinstance(score, (int, float)) and score >= 1.0, question.units[0]


def reward_judge(world: TaskWorld, question: Question, prompt: str) -> tuple[bool, str]:
    """An attempt judged by the reward its prompt reports (the checks decided it); the chore's family."""
    match = _REWARD.search(prompt)
    return match is not None and float(match[1]) >= 1.0, question.units[0]


def reflect(world: TaskWorld, request: SimRequest) -> str:
    """ACE's reflector on an episode (module docstring)."""
    prompt = request.messages[-1].content if request.messages else ""
    seed = request.seed or 0
    question = world.question(tagged(prompt, "question") or "")
    if question is None:
        return json_reply(reflection_reply("The task is unknown to me.", "", "", "", "", []))
    match = _OUTCOME.search(prompt)
    right = match is not None and match[1] == "correct"
    unit = question.units[0]
    family = BY_KEY[question.example.meta["family"]]
    params = world.params
    naming = params.name_unit_after_right if right else params.name_unit_after_wrong
    cited = re.findall(r"^\[([^\]]+)\] helpful=", prompt, re.MULTILINE)
    draw = uniform("reflect", seed, question.example.input)
    facet = int(uniform("facet", seed, question.example.input) * params.facets_per_unit)
    if not params.informative_reflections:
        lesson = noise_lesson(facet)
    elif draw < naming:
        lesson = family_lesson(unit, family.lessons, facet)
    else:
        lesson = generic_terminal_lesson(int(uniform("generic", seed) * len(GENERIC_TERMINAL_LESSONS)))
    tags = [{"id": bid, "tag": "helpful" if right else "harmful"} for bid in cited]
    verdict = "The chore was done." if right else "The chore was not done."
    return json_reply(reflection_reply(
        f"{verdict} " + _prose(3, "reflect-reasoning", seed),
        "No error." if right else f"The {unit.lower()} step went wrong. " + _prose(1, "err", seed),
        "Nothing failed." if right else f"The agent did not know how to handle {unit.lower()}.",
        f"Apply the lesson about {unit.lower()} before acting. " + _prose(2, "approach", seed),
        lesson,
        tags,
    ))


def _final_state(prompt: str) -> str:
    return "The final state"


def _family_units(example: Example) -> tuple[str, ...]:
    return (BY_KEY[example.meta["family"]].name,)


def terminal_world(task: Task, splits: Sequence[str] = (), *, variant: str = "default") -> TaskWorld:
    """The world of the terminal ``task`` knowing the chores of ``splits`` (default: train,
    selection and test), as the world ``variant`` has it (module docstring)."""
    from combee_fast.sim.worlds import built_in_roles

    examples = [e for s in (splits or ("train", "selection", "test")) for e in task.load(s).examples]
    chores = {e.input.strip(): task.chore(e) for e in examples}  # type: ignore[attr-defined]
    roles = built_in_roles()
    agent = Agent(chores)
    roles.update({role: agent.serving(roles[role]) for role in SERVING_ROLES})
    roles.update({
        "reflector": reflect,
        GEPA_PROPOSER_ROLE: Proposer(row_judge, family_namer),
        TEXTGRAD_LOSS_ROLE: Loss(reward_judge, _final_state),
        TEXTGRAD_GRADIENT_ROLE: Gradient(reward_judge, family_namer),
    })
    return TaskWorld(task, examples, world_params(TERMINAL_PARAMS, variant), roles=roles, units=_family_units)
