"""The terminal task's world: the simulated endpoint plays the agent. A model, not evidence about
real LLMs.

:func:`terminal_world` is the :class:`~combee_fast.sim.world.TaskWorld` whose knowledge units are
the chore families of :mod:`combee_fast.tasks.terminal.families` (the terminal task names it as
its ``sim_world``); every learner's role is answered by its own responder, as in any world (the
curator overloads along the calibrated curve), but for:

- **the agent** (:class:`Agent`): a turn of the built-in ReAct agent, made as whichever role
  serves the learned context (a role in pool ``serve``, any learner's): the learned context is
  in the system message (:func:`~combee_fast.sim.agent_world.context_of`), the chore in the first
  user message's ``<task>``; tool calls or JSON actions alike. A request of those roles that is
  no agent turn is answered by the role's own responder. The agent's first turn inspects the working directory; on
  its second it decides, once per episode, whether it knows the chore's family. It does when a
  line of the context states a lesson about the family, found by its text as a model would find
  it (it names the family, or says what one of the family's lessons says; ACE's bullets or plain
  lines alike), or the retry's reflection names it: then with probability ``known_accuracy``;
  otherwise with ``base_accuracy`` (plus the generic lessons' small gain). Knowing it, it issues
  the oracle's commands one per turn; not knowing it, one of the family's plausible mistakes.
  Then it finishes (citing the context entries it used, when the context has citable parts).
  A user's own agent asking in a plain prompt (no context block in a system message, no tools,
  no schema) that names a chore gets one shell line: the commands its path would issue, joined
  by ``&&`` (the path decided the same way, from the lessons the prompt's other lines state).
  The commands really run in the sandbox and the chore's real checks decide success. Which path
  a later turn is on is read back from the commands already in the conversation.
- **the reflector** (ACE): reads the outcome the prompt reports (the checks decided it), and names
  a lesson about the chore's family (one of the family's own lessons) with the default world's
  probabilities, else a generic lesson.
- **GEPA's proposer**: as the default world's (:func:`~combee_fast.gepa.sim.propose`), each
  example judged by the score its row reports (the checks decided it), the lesson named one of
  the family's own.
- **TextGrad's loss and gradient**: as the default world's (:func:`~combee_fast.textgrad.sim.loss`,
  :func:`~combee_fast.textgrad.sim.gradient`), the attempt judged by the reward its prompt
  reports, the gradient's line one of the family's own lessons.

``base_accuracy`` is 0.322: the no-learning success rate on Terminal-Bench 2.0 that the Combee
paper (arXiv 2604.04247) reports for its agent before any prompt learning. Every other parameter
is the default world's.
"""

from __future__ import annotations

from collections.abc import Sequence

from combee_fast.protocols.tasks import Task
from combee_fast.schema import Example
from combee_fast.sim.agent_world import (ContextLine, action_reply, actions, context_lines, context_of, finish_reply,
                                         knows_the_way, states_lesson_of)
from combee_fast.sim.responders import RoleTable, SimReply, SimRequest
from combee_fast.sim.world import (EpisodeWords, Lessons, TaskWorld, WorldParams, playbook_bullets, seed_of, tagged,
                                   uniform, world_params)
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

_BY_NAME = {family.name: family for family in BY_KEY.values()}

TERMINAL_LESSONS = Lessons(lambda name: _BY_NAME[name].lessons, GENERIC_TERMINAL_LESSONS)
"""What the terminal world teaches: each family's own lessons, and generic ones."""

TERMINAL_WORDS = EpisodeWords(
    thing="task", outcomes=("The chore was not done.", "The chore was done."),
    cause="The agent did not know how to handle {unit}.", remedy="Apply the lesson about {unit} before acting.",
    result="The final state", filler=TERMINAL_FILLER, filler_key="terminal-prose")
"""How the terminal world speaks of its episodes."""


def _commands(request: SimRequest) -> list[str]:
    """The ``run`` commands the agent's earlier turns issued, in order."""
    return [command for name, arguments in actions(request.messages)
            if name == "run" and isinstance(command := arguments.get("command"), str)]


class Agent:
    """The agent's turns (module docstring) on the chores ``chores`` (by instruction)."""

    words = TERMINAL_WORDS

    def __init__(self, chores: dict[str, Chore]) -> None:
        self.chores = chores

    def turn(self, world: TaskWorld, request: SimRequest) -> str | SimReply | None:
        system = context_of(request)
        return self.act(world, request, system) if system is not None else self.plain(world, request)

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
        unit = BY_KEY[chore.family].name
        rest = text.replace(instruction, "\n")
        lines: list[ContextLine] = [entry[0] if (entry := playbook_bullets(line)) else (None, line.strip())
                                    for line in rest.splitlines() if line.strip()]
        about = [(bid, line) for bid, line in lines if states_lesson_of(line, unit, world.lessons)]
        path = self._path(world, chore, [], about, lines, unit, "", seed_of(request), instruction)
        return " && ".join(path or chore.oracle)

    def act(self, world: TaskWorld, request: SimRequest, system: str) -> str | SimReply:
        first = next((m.content for m in request.messages if m.role == "user"), "")
        instruction = (tagged(first, "task") or "").strip()
        chore = self.chores.get(instruction)
        seed = seed_of(request)
        lines, citable = context_lines(system)
        if chore is None:
            return action_reply(request, "finish", {"answer": "I do not know this task."}, "The task is unknown to me.")
        issued = _commands(request)
        unit = BY_KEY[chore.family].name
        about = [(bid, text) for bid, text in lines if states_lesson_of(text, unit, world.lessons)]
        if not issued:
            return action_reply(request, "run", {"command": INSPECT}, "First, a look at the working directory.")
        path = self._path(world, chore, issued[1:], about, lines, unit, tagged(first, "reflection") or "", seed,
                          instruction)
        done = len(issued) - 1
        if path is None or done >= len(path):
            return finish_reply(request, about, lines, citable, world.lessons,
                                "The result is in place. " + self.words.prose(1, "finish", seed))
        thought = f"The next step for this {unit.lower()} chore. " + self.words.prose(2, "act", seed, done)
        return action_reply(request, "run", {"command": path[done]}, thought)

    @staticmethod
    def _path(world: TaskWorld, chore: Chore, issued: list[str], about: list[ContextLine], lines: list[ContextLine],
              unit: str, reflection: str, seed: int, instruction: str) -> tuple[str, ...] | None:
        """The commands this episode issues: decided on its first acting turn, read back after."""
        paths = [chore.oracle, *chore.mistakes]
        if issued:
            return next((p for p in paths if tuple(issued) == p[:len(issued)]), None)
        if knows_the_way(world, unit, about, lines, reflection, seed, instruction):
            return chore.oracle
        return chore.mistakes[int(uniform("mistake", seed, instruction) * len(chore.mistakes))]


def _family_units(example: Example) -> tuple[str, ...]:
    return (BY_KEY[example.meta["family"]].name,)


def terminal_world(task: Task, roles: RoleTable, *, splits: Sequence[str] = (), variant: str = "default") -> TaskWorld:
    """The world of the terminal ``task`` knowing the chores of ``splits`` (default: train,
    selection and test), as the world ``variant`` has it, answering ``roles`` (module docstring)."""
    examples = [e for s in (splits or ("train", "selection", "test")) for e in task.load(s).examples]
    chores = {e.input.strip(): task.chore(e) for e in examples}  # type: ignore[attr-defined]
    return TaskWorld(task, examples, world_params(TERMINAL_PARAMS, variant), roles=roles, units=_family_units,
                     lessons=TERMINAL_LESSONS, agent=Agent(chores))
