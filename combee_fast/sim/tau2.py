"""The tau2 tasks' world: the simulated endpoint plays the agent and the customer. A model, not
evidence about real LLMs.

:func:`tau2_world` is the :class:`~combee_fast.sim.world.TaskWorld` of ``tau2-retail`` or
``tau2-airline`` whose knowledge units are the domain's *policy areas*: each task's area is the
kind of its first gold action that changes the database (returns, exchanges, cancellations...),
``No change`` for a task whose gold changes nothing (information, refusals); each area has two
policy lessons, written here (the tau2 tasks name it as their ``sim_world``). Every learner's role
is answered by its own responder, as in any world, but for:

- **the agent** (:class:`Tau2Agent`): a turn of the built-in ReAct agent, as whichever role serves
  the learned context (a role in pool ``serve``, any learner's), the case named in the first user
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
- **what it teaches** (:data:`TAU2_LESSONS`): each area's own lessons and four generic ones, which
  the learners' reviewers name as in the terminal world, judging by the outcome their prompts
  report (the checker decided it), in this world's words (:data:`TAU2_WORDS`).

``base_accuracy`` is 0.143: the tau2-bench test-split score (Pass@4, airline, retail and telecom
together) of Qwen3-4B-Instruct-2507 before any training, as the model card of
Jarrodbarnes/Qwen3-4B-tau2-grpo-v1 (January 2026, Hugging Face) reports it. Every other parameter
is the default world's.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence

from combee_fast.protocols.tasks import Task
from combee_fast.schema import Example
from combee_fast.sim.agent_world import (action_reply, actions, context_lines, context_of, finish_reply, knows_the_way,
                                         states_lesson_of)
from combee_fast.sim.responders import RoleTable, SimReply, SimRequest
from combee_fast.sim.world import EpisodeWords, Lessons, TaskWorld, WorldParams, seed_of, tagged, world_params
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

_CASE = re.compile(r"Case (?:retail|airline)-(\S+?)\.")


def write_index(task: Tau2Task) -> int | None:
    """The index of the last gold action that changes the database (None: none does)."""
    found = [i for i, action in enumerate(_gold(task)) if action.name in AREAS]
    return found[-1] if found else None


def area_of(task: Tau2Task) -> tuple[str, tuple[str, str]]:
    """The task's policy area (module docstring) and its lessons."""
    first = next((action.name for action in _gold(task) if action.name in AREAS), None)
    return AREAS[first] if first is not None else NO_CHANGE


def _gold(task: Tau2Task) -> list[Action]:
    criteria = task.evaluation_criteria
    return list(criteria.actions or []) if criteria else []


def _told(task: Tau2Task) -> list[str]:
    """What the task requires the customer to be told."""
    criteria = task.evaluation_criteria
    return list(criteria.communicate_info or []) if criteria else []


def _lessons_of(unit: str) -> tuple[str, str]:
    return next((lessons for name, lessons in (*AREAS.values(), NO_CHANGE) if name == unit), NO_CHANGE[1])


TAU2_LESSONS = Lessons(_lessons_of, GENERIC_LESSONS)
"""What the tau2 world teaches: each policy area's own lessons, and generic ones."""

TAU2_WORDS = EpisodeWords(
    thing="case", outcomes=("The case was not handled.", "The case was handled."),
    cause="The agent did not apply the policy on {unit}.", remedy="Apply the policy on {unit} before acting.",
    result="The final database state", filler=TAU2_FILLER, filler_key="tau2-prose")
"""How the tau2 world speaks of its episodes."""


class Tau2Agent:
    """The agent's turns (module docstring) on ``domain``'s tasks."""

    words = TAU2_WORDS

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

    def turn(self, world: TaskWorld, request: SimRequest) -> str | SimReply | None:
        system = context_of(request)
        return self.act(world, request, system) if system is not None else None

    def act(self, world: TaskWorld, request: SimRequest, system: str) -> str | SimReply:
        first = next((m.content for m in request.messages if m.role == "user"), "")
        case = _CASE.search(tagged(first, "task") or "")
        task = self.domain.tasks.get(case[1]) if case else None
        if task is None:
            return action_reply(request, "finish", {"answer": "unknown case"}, "This case is unknown to me.")
        seed = seed_of(request)
        lines, citable = context_lines(system)
        unit, _ = area_of(task)
        about = [(bid, text) for bid, text in lines if states_lesson_of(text, unit, world.lessons)]
        taken = [name for name, _ in actions(request.messages)]
        if RESPOND.name in taken:  # the user was told: the conversation is over
            return finish_reply(request, about, lines, citable, world.lessons,
                                "The conversation is over. " + self.words.prose(1, "finish", seed))
        done = sum(1 for name in taken if name not in (RESPOND.name, "finish"))
        decision = write_index(task)
        if done == (decision if decision is not None else len(_gold(task))) and not knows_the_way(
                world, unit, about, lines, tagged(first, "reflection") or "", seed, task.id):
            return self._mistaken(request, task, decision)
        return self._next(request, task, unit, done, seed)

    def _mistaken(self, request: SimRequest, task: Tau2Task, decision: int | None) -> str | SimReply:
        """The episode's one decision went the wrong way: the area's mistake at the gold action
        ``decision`` (None: the task changes nothing, and what it requires told is left unsaid)."""
        if decision is None:
            return self._tell(request, [], False)
        wrong = self.mistake(_gold(task)[decision])
        if wrong is None:
            return self._tell(request, _told(task), False)
        return action_reply(request, wrong.name, dict(wrong.arguments), "Making the change the user asked for.")

    def _next(self, request: SimRequest, task: Tau2Task, unit: str, done: int, seed: int) -> str | SimReply:
        """The gold action after the ``done`` taken, or, all taken, telling the customer."""
        gold = _gold(task)
        if done < len(gold):
            action = gold[done]
            thought = f"The next step of this {unit.lower()} case. " + self.words.prose(1, "act", seed, done)
            return action_reply(request, action.name, dict(action.arguments), thought)
        return self._tell(request, _told(task), True)

    @staticmethod
    def _tell(request: SimRequest, info: list[str], done: bool) -> str | SimReply:
        said = "; ".join(info)
        message = ("Your request is handled." if done else "I have looked into your request.") \
            + (f" For your information: {said}." if said else "") + " Is there anything else?"
        return action_reply(request, RESPOND.name, {"message": message}, "Telling the user the outcome.")


def customer(world: TaskWorld, request: SimRequest) -> str:
    """The customer's turn (module docstring)."""
    last = next((m.content for m in reversed(request.messages) if m.role == "user"), "")
    if last.strip() == GREETING:
        scenario = tagged(next((m.content for m in request.messages if m.role == "system"), ""), "scenario") or ""
        parts = [block.split(":\n", 1)[1].strip() for block in scenario.split("\n\n")
                 if block.startswith(("Why you are calling:", "What you know:")) and ":\n" in block]
        return " ".join(parts) or "I need help with my account."
    return "Thank you, that is all I needed.\n###STOP###"


def tau2_world(task: Task, roles: RoleTable, *, splits: Sequence[str] = (), variant: str = "default") -> TaskWorld:
    """The world of the tau2 ``task`` knowing the cases of ``splits`` (default: train and test),
    as the world ``variant`` has it, answering ``roles`` and the customer's (module docstring)."""
    if not isinstance(task, Tau2DomainTask):
        raise TypeError(f"tau2_world plays a tau2 domain's task, not {type(task).__name__}")
    domain = task.domain
    examples = [e for s in (splits or ("train", "test")) for e in task.load(s).examples]
    roles = RoleTable({**roles.responders, USER_ROLE: customer}, roles.serving)

    def units(example: Example) -> tuple[str, ...]:
        return (area_of(domain.tasks[example.meta[TASK_META]])[0],)

    return TaskWorld(task, examples, world_params(TAU2_PARAMS, variant), roles=roles, units=units,
                     lessons=TAU2_LESSONS, agent=Tau2Agent(domain))
