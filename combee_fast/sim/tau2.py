"""The tau2 tasks' world: the simulated endpoint plays the agent and the customer. A model, not
evidence about real LLMs.

:func:`tau2_world` is the :class:`~combee_fast.sim.world.TaskWorld` of ``tau2-retail`` or
``tau2-airline`` whose knowledge units are the domain's *policy areas*: each task's area is the
kind of its first gold action that changes the database (returns, exchanges, cancellations...),
``No change`` for a task whose gold changes nothing (information, refusals); each area has two
policy lessons, written here. Every built-in role is answered as in the default world (curator,
reducer, GEPA's aggregator, TextGrad's step and reduce read lessons, not tasks), with these over
them:

- **the agent**: a turn of the built-in ReAct agent, as whichever role serves the learned context
  (``generator``, ``gepa_solver``, ``textgrad_forward``), the case named in the first user
  message's ``<task>``. It issues the task's gold actions one per turn (tool calls or JSON actions
  alike), then tells the customer what the task requires them to hear (``respond``), then
  finishes. At the last gold action that changes the database it decides, once per episode,
  whether it knows the area's policy: it does when a line of the context states a lesson about
  the area (it names it, or says what one of its lessons says; ACE's bullets or plain lines) or
  the retry's reflection names it, then with probability ``known_accuracy``, else with
  ``base_accuracy`` (plus the generic lessons' small gain). Not knowing it, it makes the area's
  mistake: an exchange or item change with another variant of the same product, or no change at
  all (and, for a task whose gold changes nothing, it leaves the required information unsaid).
  The actions really run on the domain's MCP server and tau2's checker decides success (a task
  whose gold changes nothing and requires nothing said is passed by any path).
- **the customer** (role ``user``): opens with the scenario's reason for the call and what it
  knows (from its prompt), then answers the agent's next message with thanks and ``###STOP###``.
- **the reflector**, **GEPA's proposer**, **TextGrad's loss and gradient**: as the terminal
  world's, judging by the outcome, score or reward the prompt reports (the checker decided it),
  the lesson named one of the task's area's own.

``base_accuracy`` is 0.143: the tau2-bench test-split score (Pass@4, airline, retail and telecom
together) of Qwen3-4B-Instruct-2507 before any training, as the model card of
Jarrodbarnes/Qwen3-4B-tau2-grpo-v1 (January 2026, Hugging Face) reports it. Every other parameter
is the default world's.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from typing import Any

import msgspec
import orjson

from combee_fast.protocols.tasks import Task
from combee_fast.roles.names import GEPA_PROPOSER_ROLE, GEPA_SOLVER_ROLE, TEXTGRAD_FORWARD_ROLE, TEXTGRAD_GRADIENT_ROLE
from combee_fast.roles.names import TEXTGRAD_LOSS_ROLE
from combee_fast.schema import Example, Message
from combee_fast.sim.ace import reflection_reply
from combee_fast.sim.instructions import Proposer
from combee_fast.sim.responders import RoleResponder, SimReply, SimRequest
from combee_fast.sim.terminal import SERVING_ROLES, context_lines, reward_judge, row_judge
from combee_fast.sim.textgrad import Gradient, Loss
from combee_fast.sim.world import TaskWorld, WorldParams, json_reply, lesson_unit, noise_lesson, seed_of, tagged
from combee_fast.sim.world import playbook_bullets, uniform, world_params
from combee_fast.tasks.tau2.domain import Action, Domain, Tau2Task
from combee_fast.tasks.tau2.environment import RESPOND, TASK_META
from combee_fast.tasks.tau2.task import Tau2DomainTask
from combee_fast.tasks.tau2.user import GREETING, USER_ROLE

TAU2_PARAMS = WorldParams(base_accuracy=0.143, facets_per_unit=2)
"""The tau2 world: a small open model's published tau2-bench score before training (module
docstring); each policy area has two lessons."""

AREAS: dict[str, tuple[str, tuple[str, str]]] = {
    "return_delivered_order_items": ("Returns", (
        "only a delivered order can be returned; collect every item to return before the one return call",
        "the refund goes to the original payment method or a gift card of the user, as the user chooses")),
    "exchange_delivered_order_items": ("Exchanges", (
        "exchange an item only for another variant of the same product, the exact one the user asked for",
        "collect all items to exchange into one call; an order is exchanged at most once")),
    "modify_pending_order_items": ("Item changes", (
        "a pending order's item changes to another variant of the same product, the one the user confirmed",
        "put every item to change in the one modify call; it can be made once per order")),
    "cancel_pending_order": ("Cancellations", (
        "check the order is pending before cancelling, with the reason 'no longer needed' or 'ordered by mistake'",
        "cancel only the orders the user confirmed, one call per order")),
    "modify_pending_order_address": ("Order address", (
        "only a pending order's shipping address can change; use the address the user gave, field by field",
        "confirm the full new address with the user before the change")),
    "modify_pending_order_payment": ("Order payment", (
        "a pending order's payment moves to another method of the same user; a gift card must cover the total",
        "confirm the new payment method before the change")),
    "modify_user_address": ("Profile address", (
        "the default address of the authenticated user is changed, not an order's",
        "confirm the full new address with the user before the change")),
    "cancel_reservation": ("Reservation cancellations", (
        "cancel only within 24 hours of booking, or for a covered reason, or with insurance, or a cancelled flight",
        "check the reservation's flights have not flown before cancelling")),
    "update_reservation_flights": ("Flight changes", (
        "basic economy flights cannot change; other cabins keep origin, destination and trip type",
        "search the new flights and charge the fare difference to a method of the user")),
    "update_reservation_baggages": ("Baggage", (
        "bags may be added, never removed; free bags depend on membership and cabin",
        "charge the extra bags to a payment method of the user")),
    "update_reservation_passengers": ("Passengers", (
        "the number of passengers stays the same; only their details change",
        "update every passenger of the reservation in one call")),
    "book_reservation": ("Bookings", (
        "book for the authenticated user with at most five passengers and their full details",
        "use at most one certificate, one credit card and three gift cards to pay")),
    "send_certificate": ("Compensation", (
        "offer a certificate only to a member or insured user who complains of a cancelled or delayed flight",
        "never offer compensation unless the user asks for it")),
}
"""The policy area of each database-changing tool, and its two lessons (this world's own words)."""

NO_CHANGE = ("No change", (
    "when the policy does not allow the request, refuse it and change nothing",
    "answer questions from the tools' results and tell the user the exact figures they asked for"))
"""The area of a task whose gold changes nothing."""

GENERIC_LESSONS = (
    "Authenticate the user first, by email or by name and zip code.",
    "List the details of a change and get an explicit yes before making it.",
    "Make one tool call at a time, and tell the user the outcome.",
    "Never make up ids, prices or policies the tools did not give.",
)

TAU2_FILLER = (
    "The user was authenticated before anything was looked up.",
    "The details were read from the tools, not assumed.",
    "The change was confirmed with the user first.",
    "The outcome was told to the user in plain words.",
)

_OUTCOME = re.compile(r"^Outcome: (correct|incorrect)", re.MULTILINE)
_CASE = re.compile(r"Case (?:retail|airline)-(\S+?)\.")


def _prose(sentences: int, *seed: object) -> str:
    start = int(uniform("tau2-prose", *seed) * len(TAU2_FILLER))
    return " ".join(TAU2_FILLER[(start + i) % len(TAU2_FILLER)] for i in range(sentences))


def write_index(task: Tau2Task) -> int | None:
    """The index of the last gold action that changes the database (None: none does)."""
    actions = task.evaluation_criteria.actions if task.evaluation_criteria else None
    found = [i for i, action in enumerate(actions or []) if action.name in AREAS]
    return found[-1] if found else None


def area_of(task: Tau2Task) -> tuple[str, tuple[str, str]]:
    """The task's policy area (module docstring) and its lessons."""
    actions = task.evaluation_criteria.actions if task.evaluation_criteria else None
    first = next((action.name for action in actions or [] if action.name in AREAS), None)
    return AREAS[first] if first is not None else NO_CHANGE


def area_lesson(unit: str, lessons: Sequence[str], facet: int) -> str:
    return f"{unit} — lesson {facet + 1}: {lessons[facet % len(lessons)]}."


def generic_lesson(index: int) -> str:
    return f"General — lesson {index + 1}: {GENERIC_LESSONS[index % len(GENERIC_LESSONS)]}"


def _lessons_of(unit: str) -> tuple[str, str]:
    return next((lessons for name, lessons in (*AREAS.values(), NO_CHANGE) if name == unit), NO_CHANGE[1])


def states_lesson_of(text: str, unit: str) -> bool:
    return lesson_unit(text) == unit or any(lesson in text for lesson in _lessons_of(unit))


def is_generic(text: str) -> bool:
    return lesson_unit(text) == "General" or any(lesson in text for lesson in GENERIC_LESSONS)


def _calls(messages: Sequence[Message]) -> list[tuple[str, dict[str, Any]]]:
    """The tool calls the agent's earlier turns made, in order (tool calls or JSON actions)."""
    found: list[tuple[str, dict[str, Any]]] = []
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
            try:
                decoded = orjson.loads(arguments)
            except orjson.JSONDecodeError:
                decoded = {}
            found.append((name, decoded if isinstance(decoded, dict) else {}))
    return found


def _reply(request: SimRequest, tool: str, arguments: dict[str, Any], thought: str) -> str | SimReply:
    from combee_fast.schema import ToolCall

    if request.tools:
        return SimReply(thought, (ToolCall(tool, msgspec.json.encode(arguments).decode()),))
    return orjson.dumps({"thought": thought, "tool": tool, "arguments": arguments}).decode()


class Tau2Agent:
    """The agent's and the customer's turns (module docstring) on ``domain``'s tasks."""

    def __init__(self, domain: Domain) -> None:
        self.domain = domain

    @functools.cached_property
    def _variants(self) -> dict[str, list[str]]:
        """Each item id: the available item ids of its product (in the initial database)."""
        out: dict[str, list[str]] = {}
        for product in self.domain.fresh_db().get("products", {}).values():
            items = [item for item, variant in product.get("variants", {}).items() if variant.get("available")]
            for item in product.get("variants", {}):
                out[item] = items
        return out

    def mistake(self, action: Action) -> Action | None:
        """The area's mistake for the write ``action``: another variant of the same product in an
        exchange or item change, else no call at all (None)."""
        new_items = action.arguments.get("new_item_ids")
        if isinstance(new_items, list) and new_items:
            first = str(new_items[0])
            other = next((i for i in self._variants.get(first, []) if i != first), None)
            if other is not None:
                return Action(action.name, {**action.arguments, "new_item_ids": [other, *new_items[1:]]})
        return None

    def serving(self, otherwise: RoleResponder) -> RoleResponder:
        def respond(world: TaskWorld, request: SimRequest) -> str | SimReply:
            system = next((m.content for m in request.messages if m.role == "system"
                           and ("<playbook>" in m.content or "<instructions>" in m.content)), None)
            return self.act(world, request, system) if system is not None else otherwise(world, request)

        return respond

    def act(self, world: TaskWorld, request: SimRequest, system: str) -> str | SimReply:
        first = next((m.content for m in request.messages if m.role == "user"), "")
        case = _CASE.search(tagged(first, "task") or "")
        task = self.domain.tasks.get(case[1]) if case else None
        if task is None:
            return _reply(request, "finish", {"answer": "unknown case"}, "This case is unknown to me.")
        criteria = task.evaluation_criteria
        gold = list(criteria.actions or []) if criteria else []
        info = list(criteria.communicate_info or []) if criteria else []
        seed = seed_of(request)
        lines, citable = context_lines(system)
        unit, _ = area_of(task)
        about = [(bid, text) for bid, text in lines if states_lesson_of(text, unit)]
        calls = _calls(request.messages)
        if any(name == RESPOND.name for name, _ in calls):  # the user was told: the conversation is over
            return self._finish(request, about, lines, citable, seed)
        done = sum(1 for name, _ in calls if name not in (RESPOND.name, "finish"))
        k = write_index(task)
        if done == (k if k is not None else len(gold)):  # the one decision of the episode
            known = bool(about) or f"{unit} — " in (tagged(first, "reflection") or "")
            base = world.base_accuracy(sum(1 for _, text in lines if is_generic(text)))
            if uniform("act", seed, task.id) >= (world.params.known_accuracy if known else base):
                if k is None:
                    return self._tell(request, [], False)
                wrong = self.mistake(gold[k])
                if wrong is None:
                    return self._tell(request, info, False)
                return _reply(request, wrong.name, dict(wrong.arguments), "Making the change the user asked for.")
        if done < len(gold):
            action = gold[done]
            thought = f"The next step of this {unit.lower()} case. " + _prose(1, "act", seed, done)
            return _reply(request, action.name, dict(action.arguments), thought)
        return self._tell(request, info, True)

    @staticmethod
    def _tell(request: SimRequest, info: list[str], done: bool) -> str | SimReply:
        said = "; ".join(info)
        message = ("Your request is handled." if done else "I have looked into your request.") \
            + (f" For your information: {said}." if said else "") + " Is there anything else?"
        return _reply(request, RESPOND.name, {"message": message}, "Telling the user the outcome.")

    @staticmethod
    def _finish(request: SimRequest, about: list[tuple[str | None, str]], lines: list[tuple[str | None, str]],
                citable: bool, seed: int) -> str | SimReply:
        finish: dict[str, object] = {"answer": "done"}
        if citable:
            generic = [bid for bid, text in lines if bid is not None and is_generic(text)][:2]
            finish["bullet_ids"] = [bid for bid, _ in about if bid is not None][:2] + generic
        return _reply(request, "finish", finish, "The conversation is over. " + _prose(1, "finish", seed))


def customer(world: TaskWorld, request: SimRequest) -> str:
    """The customer's turn (module docstring)."""
    last = next((m.content for m in reversed(request.messages) if m.role == "user"), "")
    if last.strip() == GREETING:
        scenario = tagged(next((m.content for m in request.messages if m.role == "system"), ""), "scenario") or ""
        parts = [block.split(":\n", 1)[1].strip() for block in scenario.split("\n\n")
                 if block.startswith(("Why you are calling:", "What you know:")) and ":\n" in block]
        return " ".join(parts) or "I need help with my account."
    return "Thank you, that is all I needed.\n###STOP###"


def area_namer(world: TaskWorld, unit: str, names_unit: bool, text: str, seed: int) -> str:
    """One of the area's own lessons (when the draw names it), else a generic one."""
    if names_unit:
        facet = int(uniform("facet", seed, text) * world.params.facets_per_unit)
        return area_lesson(unit, _lessons_of(unit), facet)
    return generic_lesson(int(uniform("generic", seed, text) * len(GENERIC_LESSONS)))


def reflect(world: TaskWorld, request: SimRequest) -> str:
    """ACE's reflector on an episode (module docstring)."""
    prompt = request.messages[-1].content if request.messages else ""
    seed = request.seed or 0
    question = world.question(tagged(prompt, "question") or "")
    if question is None:
        return json_reply(reflection_reply("The case is unknown to me.", "", "", "", "", []))
    match = _OUTCOME.search(prompt)
    right = match is not None and match[1] == "correct"
    unit = question.units[0]
    params = world.params
    naming = params.name_unit_after_right if right else params.name_unit_after_wrong
    cited = re.findall(r"^\[([^\]]+)\] helpful=", prompt, re.MULTILINE)
    draw = uniform("reflect", seed, question.example.input)
    facet = int(uniform("facet", seed, question.example.input) * params.facets_per_unit)
    if not params.informative_reflections:
        lesson = noise_lesson(facet)
    elif draw < naming:
        lesson = area_lesson(unit, _lessons_of(unit), facet)
    else:
        lesson = generic_lesson(int(uniform("generic", seed) * len(GENERIC_LESSONS)))
    tags = [{"id": bid, "tag": "helpful" if right else "harmful"} for bid in cited]
    verdict = "The case was handled." if right else "The case was not handled."
    return json_reply(reflection_reply(
        f"{verdict} " + _prose(3, "reflect-reasoning", seed),
        "No error." if right else f"The {unit.lower()} step went wrong. " + _prose(1, "err", seed),
        "Nothing failed." if right else f"The agent did not apply the policy on {unit.lower()}.",
        f"Apply the policy on {unit.lower()} before acting. " + _prose(2, "approach", seed),
        lesson,
        tags,
    ))


def _final_state(prompt: str) -> str:
    return "The final database state"


def tau2_world(task: Task, splits: Sequence[str] = (), *, variant: str = "default") -> TaskWorld:
    """The world of the tau2 ``task`` knowing the cases of ``splits`` (default: train and test),
    as the world ``variant`` has it (module docstring)."""
    from combee_fast.sim.worlds import built_in_roles

    if not isinstance(task, Tau2DomainTask):
        raise TypeError(f"tau2_world plays a tau2 domain's task, not {type(task).__name__}")
    domain = task.domain
    examples = [e for s in (splits or ("train", "test")) for e in task.load(s).examples]
    roles = built_in_roles()
    agent = Tau2Agent(domain)
    roles.update({role: agent.serving(roles[role]) for role in SERVING_ROLES})
    roles.update({
        USER_ROLE: customer,
        "reflector": reflect,
        GEPA_PROPOSER_ROLE: Proposer(row_judge, area_namer),
        TEXTGRAD_LOSS_ROLE: Loss(reward_judge, _final_state),
        TEXTGRAD_GRADIENT_ROLE: Gradient(reward_judge, area_namer),
    })

    def units(example: Example) -> tuple[str, ...]:
        return (area_of(domain.tasks[example.meta[TASK_META]])[0],)

    return TaskWorld(task, examples, world_params(TAU2_PARAMS, variant), roles=roles, units=units)
