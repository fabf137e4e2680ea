"""The task world of the terminal task: the simulated endpoint plays the agent. A model, not
evidence about real LLMs.

It is the :class:`~combee_fast.sim.world.TaskWorld` (curator and reducer answered exactly as
there: the curator overloads along the calibrated curve) with its knowledge units the chore
families of :mod:`combee_fast.tasks.terminal.families`, and two roles played its own way:

- **the agent** (generator requests of the built-in ReAct agent: a ``<playbook>`` in the system
  message, a ``<task>`` in the first user message; tool calls or JSON actions alike): its first
  turn inspects the working directory; on its second it decides, once per episode, whether it
  knows the chore's family. It does when the context holds a lesson about the family (or the
  retry's reflection names it), with probability ``known_accuracy``; otherwise with
  ``base_accuracy`` (plus the generic lessons' small gain). Knowing it, it issues the oracle's
  commands one per turn; not knowing it, one of the family's plausible mistakes. Then it
  finishes. The commands really run in the sandbox and the chore's real checks decide success.
  Which path a later turn is on is read back from the commands already in the conversation.
- **the reflector**: reads the outcome the prompt reports (the checks decided it), and names a
  lesson about the chore's family (one of the family's own lessons) with the default world's
  probabilities, else a generic lesson.

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
from combee_fast.schema import Example, Message, ToolCall
from combee_fast.sim.instructions import InstructionWorld
from combee_fast.sim.responders import SimReply, SimRequest
from combee_fast.sim.world import (
    WorldParams, _bullets, _Question, _reflection, _uniform, lesson_unit, noise_lesson, world_params,
)
from combee_fast.tasks.terminal.chores import Chore
from combee_fast.tasks.terminal.families import BY_KEY

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

_TAGS = {name: re.compile(rf"<{name}>\n(.*?)\n?</{name}>", re.DOTALL) for name in (
    "playbook", "task", "reflection", "question")}
_OUTCOME = re.compile(r"^Outcome: (correct|incorrect)", re.MULTILINE)


def _section(text: str, name: str) -> str:
    match = _TAGS[name].search(text)
    return match[1] if match else ""


def _prose(sentences: int, *seed: object) -> str:
    start = int(_uniform("terminal-prose", *seed) * len(TERMINAL_FILLER))
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


class TerminalWorld(InstructionWorld):
    """The terminal task's world (module docstring)."""

    def __init__(self, task: Task, examples: Sequence[Example], params: WorldParams, chores: dict[str, Chore]) -> None:
        super().__init__(task, examples, params)
        self._chores = chores
        for example in examples:
            family = BY_KEY[example.meta["family"]]
            self._questions[example.input.strip()] = _Question(example, (family.name,))

    @classmethod
    def for_task(cls, task: Task, splits: Sequence[str] = (), *, variant: str = "default") -> TerminalWorld:
        examples = [e for s in (splits or ("train", "selection", "test")) for e in task.load(s).examples]
        chores = {e.input.strip(): task.chore(e) for e in examples}  # type: ignore[attr-defined]
        return cls(task, examples, world_params(TERMINAL_PARAMS, variant), chores)

    def respond(self, request: SimRequest) -> str | SimReply:
        if request.role == "generator" and any(m.role == "system" and "<playbook>" in m.content
                                               for m in request.messages):
            return self._act(request)
        if request.role == "reflector":
            prompt = request.messages[-1].content if request.messages else ""
            return orjson.dumps(self._reflect_outcome(prompt, request.seed or 0)).decode()
        return super().respond(request)

    # -- the agent -------------------------------------------------------------------------------

    def _act(self, request: SimRequest) -> str | SimReply:
        system = next(m.content for m in request.messages if m.role == "system")
        first = next((m.content for m in request.messages if m.role == "user"), "")
        instruction = _section(first, "task").strip()
        chore = self._chores.get(instruction)
        seed = request.seed if request.seed is not None else 0
        if chore is None:
            return self._reply(request, "finish", {"answer": "I do not know this task."}, "The task is unknown to me.")
        issued = _commands(request.messages)
        family = BY_KEY[chore.family]
        bullets = _bullets(_section(system, "playbook"))
        cited = [bid for bid, text in bullets if lesson_unit(text) == family.name][:2]
        if not issued:
            return self._reply(request, "run", {"command": INSPECT}, "First, a look at the working directory.")
        path = self._path(chore, issued[1:], bullets, family.name, _section(first, "reflection"), seed, instruction)
        done = len(issued) - 1
        if path is None or done >= len(path):
            generic = [bid for bid, text in bullets if lesson_unit(text) == "General"][:2]
            return self._reply(request, "finish", {"answer": "done", "bullet_ids": cited + generic},
                               "The result is in place. " + _prose(1, "finish", seed))
        thought = f"The next step for this {family.name.lower()} chore. " + _prose(2, "act", seed, done)
        return self._reply(request, "run", {"command": path[done]}, thought)

    def _path(self, chore: Chore, issued: list[str], bullets: list[tuple[str, str]], unit: str, reflection: str,
              seed: int, instruction: str) -> tuple[str, ...] | None:
        """The commands this episode issues: decided on its first acting turn, read back after."""
        paths = [chore.oracle, *chore.mistakes]
        if issued:
            return next((p for p in paths if tuple(issued) == p[:len(issued)]), None)
        known = any(lesson_unit(text) == unit for _, text in bullets) or f"{unit} — " in reflection
        generic = sum(1 for _, text in bullets if lesson_unit(text) == "General")
        base = self.params.base_accuracy + self.params.generic_gain * min(1.0, generic / self.params.generic_saturation)
        if _uniform("act", seed, instruction) < (self.params.known_accuracy if known else base):
            return chore.oracle
        return chore.mistakes[int(_uniform("mistake", seed, instruction) * len(chore.mistakes))]

    @staticmethod
    def _reply(request: SimRequest, tool: str, arguments: dict[str, object], thought: str) -> str | SimReply:
        if request.tools:
            return SimReply(thought, (ToolCall(tool, msgspec.json.encode(arguments).decode()),))
        return orjson.dumps({"thought": thought, "tool": tool, "arguments": arguments}).decode()

    # -- the reflector ---------------------------------------------------------------------------

    def _reflect_outcome(self, prompt: str, seed: int) -> dict[str, object]:
        question = self._questions.get(_section(prompt, "question").strip())
        if question is None:
            return _reflection("The task is unknown to me.", "", "", "", "", [])
        match = _OUTCOME.search(prompt)
        right = match is not None and match[1] == "correct"
        unit = question.units[0]
        family = BY_KEY[question.example.meta["family"]]
        naming = self.params.name_unit_after_right if right else self.params.name_unit_after_wrong
        cited = re.findall(r"^\[([^\]]+)\] helpful=", prompt, re.MULTILINE)
        draw = _uniform("reflect", seed, question.example.input)
        facet = int(_uniform("facet", seed, question.example.input) * self.params.facets_per_unit)
        if not self.params.informative_reflections:
            lesson = noise_lesson(facet)
        elif draw < naming:
            lesson = family_lesson(unit, family.lessons, facet)
        else:
            lesson = generic_terminal_lesson(int(_uniform("generic", seed) * len(GENERIC_TERMINAL_LESSONS)))
        tags = [{"id": bid, "tag": "helpful" if right else "harmful"} for bid in cited]
        verdict = "The chore was done." if right else "The chore was not done."
        return _reflection(
            f"{verdict} " + _prose(3, "reflect-reasoning", seed),
            "No error." if right else f"The {unit.lower()} step went wrong. " + _prose(1, "err", seed),
            "Nothing failed." if right else f"The agent did not know how to handle {unit.lower()}.",
            f"Apply the lesson about {unit.lower()} before acting. " + _prose(2, "approach", seed),
            lesson,
            tags,
        )

