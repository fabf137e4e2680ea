"""Releasing learned versions: how much traffic a harmful version reaches, how often a good one is
rolled back, and how many rollouts a rollback takes, under the ``staged`` and ``shadow`` policies,
with the ``none`` policy (every version served at once) side by side as the baseline.

Per seed and policy, a host sends ``--requests`` requests from ``--users`` users (keys), each a
task from the Formula train examples of ``--units`` formulas, to an in-loop
:class:`~combee_fast.embedded.online.OnlineLearner` of ``--learner`` (``ace``: a playbook;
``gepa``: a rewritten instruction; ``textgrad``: a prompt variable) learning online on the
in-process simulated endpoint, in the task world ``noisy+harmful`` (answers drawn per call; a
share of the lessons ACE's reflector names are wrong ones that lower accuracy on their formula).
Each request is the online learner's one-step attempt (ACE: a generator call; GEPA: a solve;
TextGrad: a forward call) with ``context_for(user)``, scored, and submitted with its version.

**The host's rounds.** The host serves its requests in rounds of ``--batch-size``: a round's
requests run at once with the release as it stands when the round starts, are submitted in request
order (so the gate sees their rewards in that order) and make one batch of the online learner,
which learns from it before the next round starts. Which version serves which request is thus a
function of the seed alone, not of how fast this machine runs the learner beside the host: the
figures are the same on a quiet machine and a loaded one (a host whose learner lagged behind its
traffic by a wall-clock amount made them depend on the load: exposure 0.0114 at load 6.35, 0.0679
at 1.13, on 2026-12-07). Under ``shadow`` the re-runs' rewards reach the gate when they finish, so
only that policy's figures may still differ with the load. The release configuration
comes from the Formula card (``cards/formula.toml``) with its canary policy set per run and
``--margin`` as its claim margin (:data:`MARGIN`).

A version's *true accuracy* is its expected accuracy on the traffic (known exactly, since the
world is a model: :meth:`TaskWorld.expected_accuracy` for a playbook; for an instruction or a
prompt, the same product of :meth:`TaskWorld.unit_accuracy` over the lesson lines the solver
reads, as the world's solver reads them). A request is *harmed* when the version serving it is
more than the claim margin (``--margin``) below the best true accuracy of the incumbents so far
(the start and every version promoted up to that request): the loss the release was told not to
accept, counted against what the host already had. A version *lowers accuracy* when its true
accuracy is below that of the incumbent it was released against, by any amount.
Figures over all seeds:

- ``exposure``: staged, the share of requests harmed (served as a candidate or after a
  promotion); ``exposure_none``: the same under ``none``, where every version is the incumbent
  at once, so once a wrong lesson is learned every later version that keeps it harms;
- ``exposure_any``/``exposure_any_none``: the share of requests served by a version that lowers
  accuracy, by any amount, against the incumbent it was released against. This counts a
  candidate 0.3 points below its incumbent (a seventeenth of the margin: no release decides that in
  these runs) as fully as one 68 points below, and under ``none`` stops counting a wrong lesson
  once it is in the incumbent; kept beside ``exposure`` as the figure the earlier runs reported;
- ``false_rollback``: staged, the share of decided versions that do not lower accuracy which were
  rolled back (``false_rollback_shadow``: shadow);
- ``detect_rollouts``: staged, median and p90 of the candidate's own rollouts before a version
  that lowers accuracy was rolled back (``detect_pairs_shadow``: shadow, paired re-runs);
- ``shadow_exposure``: shadow, the share of requests served by a candidate; ``shadow_cost``:
  shadow re-run tokens over the hosts' generator tokens;
- ``accuracy_staged``/``accuracy_shadow``/``accuracy_none``: the mean true accuracy of the
  versions that served the requests, and ``accuracy_ratio``: staged over none;
- ``wrong_served_<policy>``: the share of requests served by a version holding a wrong lesson
  about a formula of the traffic (under ``none`` a wrong lesson, once learned, stays: every later
  version holds it too, which ``exposure_none`` does not count, since those versions do not lower
  accuracy further).

- ``lowering_versions``: staged, how many released versions lowered accuracy (0: the world gave
  this learner nothing harmful to learn, so ``exposure`` measures no detection; said on stderr).

    python bench/canary.py                       # 20 seeds, 3 policies each
    python bench/canary.py --learner gepa --seeds 6
Last line: ``exposure=... false_rollback=... detect_rollouts=<median>/<p90> shadow_exposure=...
shadow_cost=... exposure_none=... exposure_shadow=... exposure_any=... exposure_any_none=... ...
load=<1-min load average> learner=... lowering_versions=...``.
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import multiprocessing
import os
import statistics
import sys
import time
from pathlib import Path

import msgspec
import numpy as np

from combee_fast.config import OnlineConfig, ReleaseConfig, SessionConfig, SimConfig, TaskConfig
from combee_fast.embedded.events import ReleaseDecision
from combee_fast.embedded.online import OnlineLearner
from combee_fast.engine.loop import run
from combee_fast.gepa.online import OnlineCandidate
from combee_fast.ace.playbook import Playbook
from combee_fast.run.events import Event, Events
from combee_fast.schema import Example
from combee_fast.session import open_session
from combee_fast.sim.instructed import instruction_lessons
from combee_fast.sim.world import TaskWorld, is_harmful
from combee_fast.textgrad.variable import PromptVariable
from combee_fast.verify.card import load_card, release_config

CARD = Path(__file__).parents[1] / "cards" / "formula.toml"
WORLD = "noisy+harmful"
POLICIES = ("staged", "shadow", "none")
MARGIN = 0.05
"""The claim margin the card is given here: promoting a version within the Formula card's own 2
points needs about ten thousand rewards per version, more than these runs serve."""
STARTS = {"ace": Playbook.empty, "gepa": OnlineCandidate.seed, "textgrad": PromptVariable.seed}
"""The version each learner's online learner starts from."""


def true_accuracy(world: TaskWorld, learner: str, text: str, traffic: list[Example]) -> float:
    """The expected accuracy on ``traffic`` of the serving role reading ``text``: ACE's generator
    reads a playbook's bullets; GEPA's solver and TextGrad's forward read an instruction's lesson
    lines as the entries (:func:`~combee_fast.sim.instructed.instruction_lessons`)."""
    if learner == "ace":
        return world.expected_accuracy(text, traffic)
    entries = [(f"i{n}", lesson) for n, lesson in enumerate(instruction_lessons(text))]
    return sum(world.unit_accuracy(e.meta["formula"], entries) for e in traffic) / len(traffic)


class RunFigures(msgspec.Struct):
    """What one (seed, policy) run measured."""

    policy: str
    seed: int
    requests: int
    harmed: int  # requests served by a version more than the margin below the best incumbent so far
    lowering_served: int  # requests served by a version that lowers accuracy (any amount)
    wrong_served: int  # requests served by a version holding a wrong lesson about a formula of the traffic
    candidate_served: int  # requests served by a version while it was a candidate
    accuracy: float  # mean true accuracy of the versions that served the requests
    rolled_back_good: int
    decided_good: int
    detections: list[int]  # candidate rollouts (or pairs) before a lowering version was rolled back
    shadow_tokens: int
    host_tokens: int
    decisions: dict[str, int]
    lowering_versions: int  # released versions that lower accuracy


async def one_run(seed: int, policy: str, args: argparse.Namespace) -> RunFigures:
    config = SessionConfig(seed=seed, learner=args.learner, task=TaskConfig(train_split="train", val_split="val[0:10]"),
                           sim=SimConfig("flat", args.time_scale, world=WORLD))
    card = load_card(CARD)
    card = msgspec.structs.replace(
        card, failure_cost=msgspec.structs.replace(card.failure_cost, canary_policy=policy),
        claim=msgspec.structs.replace(card.claim, margin=args.margin))
    release = release_config(card, ReleaseConfig(stages=tuple(args.stages), shadow_share=args.shadow_share))
    online = OnlineConfig(learner=args.learner, batch_size=args.batch_size, seed=seed, release=release)
    decisions: list[ReleaseDecision] = []

    async with open_session(config) as session:
        world = TaskWorld.for_task(session.task, ("train",), variant=WORLD)
        units = sorted({e.meta["formula"] for e in session.train_split.examples})[: args.units]
        traffic = [e for e in session.train_split.examples if e.meta["formula"] in units]
        start = STARTS[args.learner]()
        truth: dict[int, float] = {0: true_accuracy(world, args.learner, start.render(), traffic)}
        wrong: dict[int, bool] = {0: False}
        rng = np.random.default_rng(seed)
        users = rng.integers(0, args.users, args.requests)
        tasks = rng.integers(0, len(traffic), args.requests)
        served = np.zeros(args.requests, dtype=np.int64)
        incumbent = np.zeros(args.requests, dtype=np.int64)
        on_candidate = np.zeros(args.requests, dtype=bool)
        host_tokens = 0

        def record(event: Event) -> None:
            """Keep each decision, and the true accuracy of every version the gate holds."""
            if isinstance(event, ReleaseDecision):
                decisions.append(event)
                for version in (learner.gate.candidate, learner.gate.incumbent):
                    if version is not None and version.number not in truth:
                        truth[version.number] = true_accuracy(world, args.learner, version.text, traffic)
                        wrong[version.number] = any(is_harmful(line) for line in version.text.splitlines()
                                                    if any(f"{unit} — " in line for unit in units))
                if "same_text_as" in event.evidence:  # refused: the text of a version rolled back before
                    truth[event.candidate] = truth[event.evidence["same_text_as"]]
                    wrong[event.candidate] = wrong[event.evidence["same_text_as"]]

        learner = OnlineLearner(session.calls, start, online, events=Events(record))
        attempts = learner.learning.attempts

        async def serve(round_: range) -> None:
            """One round of requests, served by the release as it stands, then submitted in request
            order and learned from before the next round (module docstring: the host's rounds)."""
            nonlocal host_tokens
            release = learner.release
            contexts = [release.context_for(f"user-{users[i]}") for i in round_]
            for i, context in zip(round_, contexts):
                served[i] = context.version
                incumbent[i] = release.incumbent.version
                on_candidate[i] = release.candidate is not None and context.version == release.candidate.version
            rollouts = await asyncio.gather(*(
                attempts.attempt(traffic[tasks[i]], context.text, version=context.version, epoch=0, round_=i)
                for i, context in zip(round_, contexts)))
            host_tokens += sum(r.usage.prompt_tokens + r.usage.completion_tokens for r in rollouts)
            tickets = [await learner.submit(rollout, version=context.version)
                       for rollout, context in zip(rollouts, contexts)]
            await asyncio.gather(*tickets)

        async with learner:
            for start in range(0, args.requests, args.batch_size):
                await serve(range(start, min(start + args.batch_size, args.requests)))
    lowering = {d.candidate for d in decisions if d.decision in ("candidate", "promote") and
                truth.get(d.candidate, 1.0) < truth.get(d.incumbent, 0.0) - 1e-12}
    served_accuracy = np.array([truth[v] for v in served.tolist()])
    best_so_far = np.maximum.accumulate(np.array([truth[v] for v in incumbent.tolist()]))
    decided = [d for d in decisions if d.decision in ("promote", "rollback", "refuse")]
    good = [d for d in decided if d.candidate not in lowering]
    detections = [int(d.evidence.get("candidate_rewards") or d.evidence.get("pairs") or 0)
                  for d in decided if d.decision == "rollback" and d.candidate in lowering]
    counts: dict[str, int] = {}
    for d in decisions:
        counts[d.decision] = counts.get(d.decision, 0) + 1
    return RunFigures(
        policy=policy, seed=seed, requests=args.requests,
        harmed=int((served_accuracy < best_so_far - args.margin).sum()),
        lowering_served=int(np.isin(served, list(lowering)).sum()),
        wrong_served=int(np.isin(served, [v for v, held in wrong.items() if held]).sum()),
        candidate_served=int(on_candidate.sum()), accuracy=float(served_accuracy.mean()),
        rolled_back_good=sum(d.decision == "rollback" for d in good), decided_good=len(good), detections=detections,
        shadow_tokens=learner.gate.shadow_tokens, host_tokens=host_tokens, decisions=counts,
        lowering_versions=len(lowering),
    )


def _share(numerator: int, denominator: int) -> float:
    return numerator / denominator if denominator else 0.0


def _quantile(values: list[int], q: float) -> float:
    return float(np.quantile(values, q)) if values else float("nan")


def run_one(seed: int, policy: str, args: argparse.Namespace) -> RunFigures:
    """One (seed, policy) run in its own process (its own loop and simulated endpoint)."""
    return run(one_run(seed, policy, args))


def measure(args: argparse.Namespace) -> dict[str, list[RunFigures]]:
    results: dict[str, list[RunFigures]] = {policy: [] for policy in POLICIES}
    context = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(args.workers, mp_context=context) as pool:
        futures = [pool.submit(run_one, seed, policy, args) for seed in range(args.seeds) for policy in POLICIES]
        for future in futures:
            figures = future.result()
            results[figures.policy].append(figures)
            print(f"seed {figures.seed} {figures.policy:>6}: {figures.decisions} harmed {figures.harmed} lowering-served "
                  f"{figures.lowering_served} candidate-served {figures.candidate_served} accuracy "
                  f"{figures.accuracy:.3f} detections {figures.detections}", file=sys.stderr, flush=True)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--learner", choices=sorted(STARTS), default="ace", help="the online learner")
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--requests", type=int, default=6_000, help="requests per seed and policy")
    parser.add_argument("--users", type=int, default=2_000)
    parser.add_argument("--units", type=int, default=3, help="formulas the traffic asks about")
    parser.add_argument("--margin", type=float, default=MARGIN, help="the card's claim margin for the release")
    parser.add_argument("--stages", type=float, nargs="+", default=[0.05, 0.25, 0.5, 1.0])
    parser.add_argument("--shadow-share", type=float, default=0.2)
    parser.add_argument("--batch-size", type=int, default=16,
                        help="the online learner's batch, and the requests of one round of the host")
    parser.add_argument("--time-scale", type=float, default=1e-5)
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1, help="runs at once, one process each")
    args = parser.parse_args()
    started = time.perf_counter()
    results = measure(args)
    staged, shadow, none = results["staged"], results["shadow"], results["none"]
    requests = sum(r.requests for r in staged)
    detections = [d for r in staged for d in r.detections]
    pairs = [d for r in shadow for d in r.detections]
    with open("/proc/loadavg") as loadavg:
        load = loadavg.read().split()[0]
    lowering_versions = sum(r.lowering_versions for r in staged)
    if not lowering_versions:
        print(f"canary: no version released under staged lowered accuracy: the world gave learner {args.learner} "
              "nothing harmful to learn, so exposure measures no detection here", file=sys.stderr)
    print(f"exposure={_share(sum(r.harmed for r in staged), requests):.4f} "
          f"false_rollback={_share(sum(r.rolled_back_good for r in staged), sum(r.decided_good for r in staged)):.4f} "
          f"detect_rollouts={_quantile(detections, 0.5):.0f}/{_quantile(detections, 0.9):.0f} "
          f"shadow_exposure={_share(sum(r.candidate_served for r in shadow), requests):.4f} "
          f"shadow_cost={_share(sum(r.shadow_tokens for r in shadow), sum(r.host_tokens for r in shadow)):.4f} "
          f"exposure_none={_share(sum(r.harmed for r in none), requests):.4f} "
          f"exposure_shadow={_share(sum(r.harmed for r in shadow), requests):.4f} "
          f"exposure_any={_share(sum(r.lowering_served for r in staged), requests):.4f} "
          f"exposure_any_none={_share(sum(r.lowering_served for r in none), requests):.4f} "
          f"false_rollback_shadow={_share(sum(r.rolled_back_good for r in shadow), sum(r.decided_good for r in shadow)):.4f} "
          f"detect_pairs_shadow={_quantile(pairs, 0.5):.0f}/{_quantile(pairs, 0.9):.0f} "
          f"accuracy_staged={statistics.mean(r.accuracy for r in staged):.4f} "
          f"accuracy_shadow={statistics.mean(r.accuracy for r in shadow):.4f} "
          f"accuracy_none={statistics.mean(r.accuracy for r in none):.4f} "
          f"accuracy_ratio={statistics.mean(r.accuracy for r in staged) / statistics.mean(r.accuracy for r in none):.2f} "
          f"wrong_served_staged={_share(sum(r.wrong_served for r in staged), requests):.4f} "
          f"wrong_served_shadow={_share(sum(r.wrong_served for r in shadow), requests):.4f} "
          f"wrong_served_none={_share(sum(r.wrong_served for r in none), requests):.4f} "
          f"rollbacks={sum(r.decisions.get('rollback', 0) for r in staged)} "
          f"promotions={sum(r.decisions.get('promote', 0) for r in staged)} "
          f"seeds={args.seeds} requests={args.requests} margin={args.margin} "
          f"wall_s={time.perf_counter() - started:.0f} load={load} learner={args.learner} "
          f"lowering_versions={lowering_versions}")


if __name__ == "__main__":
    main()
