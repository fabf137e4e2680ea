"""A real model in real seconds: sequential ACE, naive batching and Combee on Formula, on the local
llama.cpp server with Qwen2.5-Coder-0.5B-Instruct (the ``qwen-coder-0-5b`` extra).

    python bench/real_model.py                                 # the local 0.5B model, default sizes
    python bench/real_model.py --train 12 --test 32 --max-rounds 1 --max-slots 8 --threads 2
    python bench/real_model.py --sim --train 40 --test 40      # the simulated endpoint: the plumbing, in seconds
    python bench/real_model.py --gepa-only --gepa-budget 72    # the GEPA pair alone (item 4)

1. **Batching.** A local server starts with ``--max-slots`` parallel slots and the start-up probe
   (:func:`combee_fast.endpoint.batching.measure_batching`) measures its generated tokens/s at 1,
   2, 4, ... requests at once, twice: with its own short prompt and long answers (the server's
   generation rate: ``batching_gain``, the peak over the rate at one request, and
   ``best_concurrency``, the smallest level the peak is not 10% above) and with Formula generator prompts, each a
   ~600-token prefill before its answer as the runs' calls are (``workload_gain``: prefill is
   compute-bound, so on a CPU it batches less than decoding).
2. **Learning.** Each method runs once over ``train[0:N]`` of Formula: sequential ACE on a
   server with one slot and one request in flight, naive batching (one step over the slice: one
   curator call reads every reflection) on ``best_concurrency`` slots, and Combee with
   ``--batch-size auto`` on ``--max-slots`` slots, its live planner sizing each step from its own
   start-up probe (the rollout role's prompts) and what its steps measure, a ``no-go`` included
   where no batch pays. Validation runs once, after the last step, on ``selection[0:V]``. Times
   are wall seconds of ``session.train``: Combee's include its planner's probe (``--probe-s``).
3. **Scoring.** Each final playbook is scored on ``test[0:M]`` (report only, never selected on),
   with its exact (Clopper-Pearson) 95% interval.
4. **GEPA.** Serial GEPA (one slot) and ``async-gepa`` (``--max-slots`` slots, its proposals in
   flight) each search from the seed instruction with ``--gepa-minibatch`` examples a proposal
   until ``--gepa-budget`` metric calls (``selection[0:V]`` the Pareto set). ``async-gepa``
   reserves a proposal's calls when it starts it and so may stop a few calls short of the budget
   where serial GEPA spends it all: ``real_gepa_speedup`` is serial GEPA's wall seconds per metric
   call over async-gepa's (the same work, counted as GEPA counts it); both totals are printed.
   The two searches do not make the same calls: their candidates differ, and a candidate that
   makes the 0.5B solver ramble or loop to ``max_tokens`` makes its metric calls longer. So
   ``real_gepa_token_rate``, async-gepa's generated tokens per second over serial GEPA's, is
   printed beside it: where the two part, the per-call figure measures what the searches asked
   the model to write as much as how fast the server wrote it.

Figures: ``real_speedup`` = sequential's training seconds / Combee's; ``utilization`` = the tokens
Combee's map generated (its generator and reflector calls) per second of its map over the server
probe's peak tokens/s. The map lasted no longer than its two roles' seconds with a call on the
wire, summed, nor than its steps' wall seconds, so the lesser of the two makes the rate a lower
bound of the map's own (their calls overlap; the curator's overlap the map). The peak is the most
the server generates (a ratio to a physical limit: above 1 the bench refuses, exit 6);
``predicted_vs_measured`` = the median over Combee's steps of the planner's predicted step time
over the measured one (its ``summary.json``; nan when no step had a prediction, as when the first
step, planned from the probe alone, takes the whole slice: the reason goes to stderr).

Why utilization is what it is: ``utilization_ceiling`` is the workload probe's peak over the
server probe's, what a map of nothing but generator calls sent at the best level reaches: on a
CPU, reading each call's prompt takes time generating would otherwise have. The server's own
count of its work during Combee's training (its ``summary.json``'s ``server_work``, from
llama.cpp's ``/metrics``: :mod:`combee_fast.endpoint.server_work`) says how much: ``prefill_share``, the share of its slot seconds spent reading
prompts, and ``cached_share``, the share of the prompt tokens its prompt cache spared it. The
bench refuses when a run learned from no call (every call failed) or the probe's rate at one
request is not positive. A page (``report.md`` with a plot of tokens/s against requests at once
and the accuracies with their intervals) goes to ``--out``.

Sizes: see docs/real-models.md for the sizes measured here and why.

``real_speedup_limit``: the most any schedule could reach on this server for this work: sequential
ACE's training seconds over the least time the server needs to generate its map's tokens (its
generator and reflector calls, which every method makes too) at the server probe's peak, prompts
read for free; a ``real_speedup`` above it is refused (exit 6). ``tokens_<method>``: generated
tokens; ``cached_share_<method>``: the share of its prompt tokens the server's prompt cache spared
it; ``retention_<method>``: of the formulas its reflections named, the share its final playbook
names (:mod:`retention`); the report adds each role's generated tokens per item.

Last line: ``real_speedup=<x> batching_gain=<x> workload_gain=<x> utilization=<share> best_concurrency=<n>
predicted_vs_measured=<ratio|nan> acc_sequential=<%> acc_sequential_lo=<%> acc_sequential_hi=<%>
acc_naive=... acc_combee=... s_sequential=<s> s_naive=<s> s_combee=<s> tokens_sequential=<n>
tokens_naive=<n> tokens_combee=<n> cached_share_<method>=<share|nan> (each method) retention_<method>=<share|nan>
(each method) real_speedup_limit=<x> real_gepa_speedup=<x> real_gepa_token_rate=<x> s_gepa=<s> s_async_gepa=<s>
metric_calls_gepa=<n> metric_calls_async_gepa=<n> val_gepa=<%> val_async_gepa=<%> (the GEPA figures unless
--gepa-budget 0) utilization_ceiling=<share> prefill_share=<share|nan> cached_share=<share|nan> train=<N>
test=<M> load_start=<1-min load> load_end=<...>``; with ``--gepa-only`` (the GEPA pair alone, no probe and
no ACE run): ``real_gepa_speedup=<x> real_gepa_token_rate=<x> s_gepa=<s> s_async_gepa=<s> metric_calls_gepa=<n>
metric_calls_async_gepa=<n> val_gepa=<%> val_async_gepa=<%> load_start=<...> load_end=<...>``
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import msgspec

from physics import WrongWorld, figures_line, guarded, physical_ratio
from retention import Formulas, reflection_texts, retention

from combee_fast.ace.generator import generator_messages
from combee_fast.ace.roles import GENERATOR
from combee_fast.config import (CacheConfig, ControllerConfig, LocalConfig, MapConfig, SessionConfig, SimConfig,
                                TaskConfig, TrainConfig, TransportConfig)
from combee_fast.endpoint.batching import BatchingCurve, measure_batching
from combee_fast.endpoint.server_work import ServerWork
from combee_fast.engine.loop import run
from combee_fast.errors import CombeeError
from combee_fast.gepa.settings import GepaConfig
from combee_fast.native.proportion import ScoreInterval
from combee_fast.readout.report import answered_interval
from combee_fast.run.batch_plans import FixedBatch
from combee_fast.run.train import TrainResult
from combee_fast.session import open_session
from combee_fast.tasks.registry import get_task

MODEL = "qwen2.5-coder-0.5b"
"""The ``--local`` model the bench runs."""
SERVER_PROBE_TOKENS = 96
"""Tokens each request of the server probe generates (its prompt asks for more): enough that the
rate is the decode's, not the request overhead's."""
WORKLOAD_PROBE_TOKENS = 160
"""Tokens each request of the workload probe may generate: the 0.5B model's Formula answers take ~130."""
METHODS = ("sequential", "naive", "combee")
"""The ACE runs, in order: the baseline first."""
GEPA_METHODS = ("gepa", "async-gepa")
"""The GEPA runs, in order: serial GEPA (the baseline) first."""
MAP_ROLES = ("generator", "reflector")
"""The roles of Combee's map (the curator's calls are its reduce)."""


class MethodRun(msgspec.Struct, frozen=True):
    """One method's training and test score: wall seconds of training, generated and prompt tokens
    (and the generated ones per role and item), the tokens its map roles generated and the most
    seconds its map can have lasted (module docstring), the test accuracy with its interval, the
    local server's count of its work during the training (None: not a llama.cpp server), and the
    retention of its reflections' lessons (:mod:`retention`: the share, and how many formulas its
    reflections named)."""

    method: str
    seconds: float
    completion_tokens: int
    prompt_tokens: int
    per_item: dict[str, float]
    map_tokens: int
    map_seconds: float
    calls: int
    failed_calls: int
    entries: int
    accuracy: ScoreInterval
    work: ServerWork | None
    retention: float | None
    named: int


def session_config(args: argparse.Namespace, *, slots: int, concurrency: int) -> SessionConfig:
    """The runs' configuration: Formula's slices, one validation after the last step, and either the
    local model on ``slots`` slots or the simulated endpoint; at most ``concurrency`` requests in
    flight; Combee's own start-up probe (its planner's) within ``--probe-s``, as the bench's."""
    base = SessionConfig(task=TaskConfig(train_split=f"train[0:{args.train}]", val_split=f"selection[0:{args.val}]"),
                         train=TrainConfig(eval_every=0, batch_size=None), seed=args.seed,
                         map=MapConfig(max_rounds=args.max_rounds), controller=ControllerConfig(probe_s=args.probe_s),
                         transport=TransportConfig(concurrency=concurrency))
    if args.sim:
        return msgspec.structs.replace(base, sim=SimConfig(preset="h200-70b", time_scale=args.time_scale))
    return msgspec.structs.replace(base, local=LocalConfig(name=MODEL, threads=args.threads, slots=slots))


class Curves(msgspec.Struct, frozen=True):
    """The two batching curves of one server: ``server``, the start-up probe's own requests (a short
    prompt, a long answer: the server's generation rate, the physical ceiling of any workload's
    generated tokens/s), and ``workload``, the same probe sending Formula generator prompts (each
    a prefill of ~600 tokens before its answer, as the runs' calls are)."""

    server: BatchingCurve
    workload: BatchingCurve


async def probe(args: argparse.Namespace) -> Curves:
    """The batching curves of a server with ``--max-slots`` slots (the simulated endpoint with
    ``--sim``). The workload's prompts come from selection rows the runs do not validate on, a
    different one per request (so no slot's prompt cache skips a prefill)."""
    config = session_config(args, slots=args.max_slots, concurrency=args.max_slots)
    async with open_session(config) as session:
        rows = session.task.load(f"selection[{args.val}:{args.val + 2 * args.max_slots}]").examples
        prompts = [generator_messages(example.input, "") for example in rows]
        client = session.clients.replicas(GENERATOR.key)[0]
        server = await measure_batching(client, budget_s=args.probe_s, max_tokens=SERVER_PROBE_TOKENS)
        workload = await measure_batching(client, budget_s=args.probe_s, max_tokens=WORKLOAD_PROBE_TOKENS,
                                          prompts=prompts)
    for name, curve in (("server", server), ("workload", workload)):
        if not curve.points or curve.points[0].tokens_per_s <= 0:
            raise WrongWorld(f"the {name} batching probe measured no rate at one request ({curve.why or curve.stopped})")
        print(f"batching ({name}): {', '.join(f'{p.concurrency}: {p.tokens_per_s:.1f} tok/s' for p in curve.points)}; "
              f"gain {curve.gain:.2f} at {curve.best_concurrency} ({curve.stopped})", file=sys.stderr, flush=True)
    return Curves(server, workload)


async def learn(args: argparse.Namespace, method: str, concurrency: int,
                out: Path) -> tuple[TrainResult, float, ScoreInterval]:
    """``method``'s one pass over the train slice on a server with ``concurrency`` slots (and as
    many requests in flight): its result, the training's wall seconds (Combee's own start-up
    probe included) and its final playbook's score on the test slice. Every reply is recorded in
    ``out/<method>-replies.cache`` (the record cache's JSON lines: role, text, usage), to read
    what the model answered."""
    replies = out / f"{method}-replies.cache"
    config = msgspec.structs.replace(session_config(args, slots=concurrency, concurrency=concurrency),
                                     cache=CacheConfig(path=str(replies), mode="record"))
    plan = {"sequential": FixedBatch(1), "naive": FixedBatch(args.train), "combee": None}[method]
    async with open_session(config) as session:
        test = session.task.load(f"test[0:{args.test}]")
        started = time.perf_counter()
        result = await session.train(method=method, plan=plan, out=out / method)
        seconds = time.perf_counter() - started
        scored = await session.evaluate(result.final, test.examples)
    if not replies.is_file() or replies.stat().st_size == 0:
        raise WrongWorld(f"{method}: no reply was recorded in {replies}")
    interval = answered_interval(scored)
    if interval is None:
        raise WrongWorld(f"{method}: no test example was answered ({scored.unanswered_by_kind}): "
                         "there is no accuracy to report")
    return result, seconds, interval


class GepaRun(msgspec.Struct, frozen=True):
    """One GEPA run: wall seconds of its search, the metric calls it made, its calls and generated
    tokens, the candidates it accepted and its best validation accuracy."""

    method: str
    seconds: float
    metric_calls: int
    calls: int
    completion_tokens: int
    accepted: int
    best_val: float | None


async def learn_gepa(args: argparse.Namespace, method: str, concurrency: int, out: Path) -> GepaRun:
    """``method`` (serial ``gepa`` or ``async-gepa``) searching from the seed instruction until
    ``--gepa-budget`` metric calls, on a server with ``concurrency`` slots and as many requests in
    flight; both take ``--gepa-minibatch`` examples a proposal, and ``selection[0:V]`` is the
    Pareto set. Its wall seconds are those of ``session.train``."""
    gepa = GepaConfig(minibatch=args.gepa_minibatch, combee_minibatch=args.gepa_minibatch,
                      max_metric_calls=args.gepa_budget)
    base = session_config(args, slots=concurrency, concurrency=concurrency)
    config = msgspec.structs.replace(base, learner="gepa", method=method, learners={"gepa": gepa},
                                     train=msgspec.structs.replace(base.train, batch_size=args.gepa_minibatch),
                                     cache=CacheConfig(path=str(out / f"{method}-replies.cache"), mode="record"))
    async with open_session(config) as session:
        started = time.perf_counter()
        result = await session.train(out=out / method)
        seconds = time.perf_counter() - started
    failed = sum(sum(kinds.values()) for kinds in result.counts.errors.values())
    if result.calls <= failed:
        raise WrongWorld(f"{method}: all {result.calls} calls failed: a search that made no call is no baseline")
    return GepaRun(method, seconds, int(result.summary["metric_calls"]), result.calls,
                   sum(result.counts.completion_tokens.values()), int(result.summary["accepted"]), result.best_val_accuracy)


def method_run(method: str, result: TrainResult, seconds: float, accuracy: ScoreInterval,
               formulas: Formulas, replies: Path) -> MethodRun:
    """The figures of one method's run (wall seconds of training), checked: a run that learned
    from no call is refused. ``replies``: its record cache, where its reflections are read."""
    failed = sum(sum(kinds.values()) for kinds in result.counts.errors.values())
    if result.calls <= failed:
        raise WrongWorld(f"{method}: all {result.calls} calls failed: a run that learned nothing is no baseline")
    completion = sum(sum(row.completion_tokens.values()) for row in result.ledger)
    prompt = sum(sum(row.prompt_tokens.values()) for row in result.ledger)
    map_tokens = sum(row.completion_tokens.get(role, 0) for row in result.ledger for role in MAP_ROLES)
    map_busy_s = sum(row.concurrency[role].busy_s for row in result.ledger for role in MAP_ROLES if role in row.concurrency)
    map_seconds = min(map_busy_s, sum(row.wall_seconds for row in result.ledger))  # module docstring
    kept, named = retention(formulas, reflection_texts(replies), [bullet.content for bullet in result.final.bullets()])
    return MethodRun(method, seconds, completion, prompt, result.counts.generated_per_item(result.samples), map_tokens,
                     map_seconds, result.calls, failed, len(result.artifact), accuracy, result.server_work, kept, named)


def share(value: float | None) -> str:
    """A share as the last line prints it; ``nan`` where it is unknown."""
    return "nan" if value is None else f"{value:.3f}"


def work_figures(work: ServerWork | None) -> dict[str, str]:
    """``prefill_share`` and ``cached_share`` of a run's server work (module docstring); ``nan``
    where the server did not count."""
    return {"prefill_share": share(work.prefill_share if work else None),
            "cached_share": share(work.cached_share if work else None)}


def speedup_limit(sequential: MethodRun, peak: float) -> float:
    """The most any schedule could speed sequential ACE's training up on this server: its wall
    seconds over the least time in which the server can generate what every method must generate
    too, sequential ACE's generator and reflector tokens (its map: each item answered and reflected
    on once), at the server's peak rate, with prompts read for free. A measured speedup above it
    is not a speedup of this work."""
    return sequential.seconds / (sequential.map_tokens / peak)


def percent(interval: ScoreInterval) -> tuple[float, float, float]:
    return 100 * interval.mean, 100 * interval.lower, 100 * interval.upper


def gepa_table(args: argparse.Namespace, searches: dict[str, GepaRun]) -> str:
    """The report's GEPA section: a row per search."""
    rows = "\n".join(f"| {g.method} | {g.seconds:,.0f} | {g.metric_calls} | {g.calls} | {g.completion_tokens:,} "
                     f"| {g.completion_tokens / g.seconds:.1f} "
                     f"| {g.accepted} | {'n/a' if g.best_val is None else f'{100 * g.best_val:.1f}'} |"
                     for g in searches.values())
    return (f"## GEPA ({args.gepa_budget} metric calls each; serial on 1 slot, async-gepa on {args.max_slots})\n\n"
            f"| method | search s | metric calls | calls | generated tokens | tokens/s | accepted | best val % |\n"
            f"|---|---|---|---|---|---|---|---|\n{rows}\n\n")


def write_page(out: Path, curves: Curves, runs: dict[str, MethodRun], searches: dict[str, GepaRun],
               figures: dict[str, str], args: argparse.Namespace) -> Path:
    """``report.md`` and ``real_model.png`` (tokens/s against requests at once, both probes; test
    accuracy with its interval per method) in ``out``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, (rate, accuracy) = plt.subplots(1, 2, figsize=(10, 4))
    for name, curve in (("server probe", curves.server), ("Formula generator prompts", curves.workload)):
        rate.plot([p.concurrency for p in curve.points], [p.tokens_per_s for p in curve.points], "o-",
                  label=f"{name} (gain {curve.gain:.2f})")
    rate.set_xlabel("requests at once")
    rate.set_ylabel("generated tokens/s")
    rate.set_title("batching")
    rate.legend()
    rate.grid(alpha=0.3)
    names = list(runs)
    means, lows, highs = zip(*(percent(runs[name].accuracy) for name in names))
    accuracy.bar(names, means, yerr=[[m - lo for m, lo in zip(means, lows)], [hi - m for m, hi in zip(means, highs)]],
                 capsize=6, color=["tab:gray", "tab:red", "tab:blue"][:len(names)])
    accuracy.set_ylabel(f"test accuracy, test[0:{args.test}] (%)")
    accuracy.set_title("final playbooks, 95% intervals")
    figure.tight_layout()
    figure.savefig(out / "real_model.png", dpi=110)
    plt.close(figure)
    rows = "\n".join(
        f"| {r.method} | {r.seconds:,.0f} | {r.calls} | {r.failed_calls} | {r.prompt_tokens:,} | {r.completion_tokens:,} "
        f"| {r.entries} | {share(r.retention)} of {r.named} "
        f"| {percent(r.accuracy)[0]:.1f} [{percent(r.accuracy)[1]:.1f}, {percent(r.accuracy)[2]:.1f}] |"
        for r in runs.values())
    roles = list(dict.fromkeys(role for r in runs.values() for role in r.per_item))
    per_item = "\n".join(f"| {r.method} | " + " | ".join(f"{r.per_item.get(role, 0.0):,.1f}" for role in roles) + " |"
                         for r in runs.values())
    work_rows = "\n".join(
        f"| {r.method} | {w.prompt_tokens:,.0f} | {'?' if w.cached_tokens is None else f'{w.cached_tokens:,.0f}'} "
        f"| {w.prompt_s:,.1f} | {w.generated_tokens:,.0f} | {w.generate_s:,.1f} | {w.prefill_share or 0:.2f} |"
        for r in runs.values() if (w := r.work) is not None) or "| (not counted: no llama.cpp server) | | | | | | |"
    levels = "\n".join(f"| {name} | {p.concurrency} | {p.latency_s:.2f} | {p.prompt_tokens} | {p.tokens_per_s:.1f} |"
                       for name, curve in (("server", curves.server), ("workload", curves.workload))
                       for p in curve.points)
    notes = " ".join(curve.why for curve in (curves.server, curves.workload) if curve.why)
    gepa = gepa_table(args, searches) if searches else ""
    page = out / "report.md"
    page.write_text(
        f"# Real model: {'the simulated endpoint' if args.sim else MODEL} on Formula\n\n"
        f"`python bench/real_model.py {' '.join(sys.argv[1:])}`; train[0:{args.train}], test[0:{args.test}], "
        f"{args.threads} thread(s); load average {figures['load_start']} at the start, {figures['load_end']} at the end.\n\n"
        f"![batching and accuracy](real_model.png)\n\n"
        f"## Batching ({args.max_slots} slots)\n\n| probe | at once | latency s | prompt tokens | tokens/s |\n"
        f"|---|---|---|---|---|\n{levels}\n\n{notes}\n\n"
        f"## Runs (sequential: 1 slot; naive: {figures['best_concurrency']}; Combee: {args.max_slots}, its planner "
        f"sizing its batches; as many requests in flight as slots)\n\n"
        f"| method | train s | calls | failed | prompt tokens | generated tokens | entries | retention (formulas) "
        f"| test % [95% CI] |\n|---|---|---|---|---|---|---|---|---|\n{rows}\n\n"
        f"Generated tokens per item learned from, by role:\n\n| method | {' | '.join(roles)} |\n"
        f"|---|{'---|' * len(roles)}\n{per_item}\n\n"
        f"## The server's work during each training (its `/metrics`; slot seconds)\n\n"
        f"| method | prompt tokens read | cached | reading s | generated | generating s | prefill share |\n"
        f"|---|---|---|---|---|---|---|\n{work_rows}\n\n{gepa}"
        f"Combee's map generated {figures['utilization']} of the server's peak tokens/s; the workload probe's "
        f"Formula prompts at their best, {figures['utilization_ceiling']} (`utilization_ceiling`).\n\n"
        f"`{figures_line(figures)}`\n")
    return page


async def search_both(args: argparse.Namespace, out: Path) -> dict[str, GepaRun]:
    """Serial GEPA on one slot, then async-gepa on ``--max-slots``, each said on stderr as it ends."""
    searches = {}
    for method in GEPA_METHODS:
        search = searches[method] = await learn_gepa(args, method, 1 if method == "gepa" else args.max_slots, out)
        print(f"  {search.method:<10} {search.seconds:7.0f} s searching, {search.metric_calls} metric calls, "
              f"{search.completion_tokens / search.seconds:.1f} tokens/s, {search.accepted} accepted",
              file=sys.stderr, flush=True)
    return searches


def gepa_figures(searches: dict[str, GepaRun]) -> dict[str, str]:
    """The GEPA pair's figures (module doc, item 4)."""
    serial, parallel = searches["gepa"], searches["async-gepa"]
    per_call = (serial.seconds / serial.metric_calls) / (parallel.seconds / parallel.metric_calls)
    rate = (parallel.completion_tokens / parallel.seconds) / (serial.completion_tokens / serial.seconds)
    return {"real_gepa_speedup": f"{per_call:.2f}", "real_gepa_token_rate": f"{rate:.2f}",
            "s_gepa": f"{serial.seconds:.0f}", "s_async_gepa": f"{parallel.seconds:.0f}",
            "metric_calls_gepa": str(serial.metric_calls), "metric_calls_async_gepa": str(parallel.metric_calls),
            "val_gepa": "nan" if serial.best_val is None else f"{100 * serial.best_val:.1f}",
            "val_async_gepa": "nan" if parallel.best_val is None else f"{100 * parallel.best_val:.1f}"}


async def bench_gepa(args: argparse.Namespace, out: Path, load_start: float) -> dict[str, str]:
    """``--gepa-only``: the GEPA pair alone, its table in ``report.md`` (``load_start``: the
    1-minute load average when the command began)."""
    searches = await search_both(args, out)
    figures = gepa_figures(searches) | {"load_start": f"{load_start:.1f}", "load_end": f"{os.getloadavg()[0]:.1f}"}
    page = out / "report.md"
    page.write_text(f"# Real model: {'the simulated endpoint' if args.sim else MODEL}, GEPA on Formula\n\n"
                    f"{gepa_table(args, searches)}`{figures_line(figures)}`\n")
    print(f"report: {page}", file=sys.stderr)
    return figures


async def bench(args: argparse.Namespace) -> dict[str, str]:
    load_start = os.getloadavg()[0]
    out = Path(args.out or f"runs/real-model-{time.strftime('%Y%m%d-%H%M%S')}")
    out.mkdir(parents=True, exist_ok=True)
    if args.gepa_only:
        return await bench_gepa(args, out, load_start)
    curves = await probe(args)
    best = curves.server.best_concurrency
    # The probe's rates are per second of the server's latency: wall seconds, or on the simulated
    # endpoint simulated ones, of which a real second holds 1 / time_scale.
    peak = curves.server.peak_tokens_per_s / (args.time_scale if args.sim else 1.0)
    formulas = Formulas(get_task("formula").load(f"train[0:{args.train}]").examples)
    runs: dict[str, MethodRun] = {}
    slots = {"sequential": 1, "naive": best, "combee": args.max_slots}  # Combee's planner sizes its own batches
    for method in METHODS:
        started = time.perf_counter()
        result, seconds, interval = await learn(args, method, slots[method], out)
        runs[method] = method_run(method, result, seconds, interval, formulas, out / f"{method}-replies.cache")
        print(f"  {method:<10} {runs[method].seconds:7.0f} s training, {percent(interval)[0]:5.1f}% test; "
              f"{time.perf_counter() - started:5.0f} s with scoring", file=sys.stderr, flush=True)
    searches = await search_both(args, out) if args.gepa_budget else {}
    combee, sequential = runs["combee"], runs["sequential"]
    if combee.map_seconds <= 0:
        raise WrongWorld("Combee's map had no call on the wire: no utilization to measure")
    utilization = physical_ratio("utilization", combee.map_tokens / combee.map_seconds / peak)
    summary = msgspec.json.decode((out / "combee" / "summary.json").read_bytes())
    ratio = (summary.get("batching") or {}).get("predicted_vs_measured")
    if ratio is None:  # the figure is nan: say why (a run of one planned step predicts none)
        print(f"predicted_vs_measured: {(summary.get('batching') or {}).get('predicted_vs_measured_reason')}",
              file=sys.stderr, flush=True)
    speedup, limit = sequential.seconds / combee.seconds, speedup_limit(sequential, peak)
    physical_ratio("real_speedup / real_speedup_limit", speedup / limit)
    figures = {"real_speedup": f"{speedup:.2f}", "batching_gain": f"{curves.server.gain:.2f}",
               "workload_gain": f"{curves.workload.gain:.2f}", "utilization": f"{utilization:.3f}",
               "best_concurrency": str(best), "predicted_vs_measured": "nan" if ratio is None else f"{ratio:.3f}"}
    for name, run_ in runs.items():
        mean, lower, upper = percent(run_.accuracy)
        figures |= {f"acc_{name}": f"{mean:.1f}", f"acc_{name}_lo": f"{lower:.1f}", f"acc_{name}_hi": f"{upper:.1f}"}
    figures |= {f"s_{name}": f"{run_.seconds:.0f}" for name, run_ in runs.items()}
    figures |= {f"tokens_{name}": str(run_.completion_tokens) for name, run_ in runs.items()}
    figures |= {f"cached_share_{name}": share(run_.work.cached_share if run_.work else None) for name, run_ in runs.items()}
    figures |= {f"retention_{name}": "nan" if run_.retention is None else f"{run_.retention:.2f}"
                for name, run_ in runs.items()}
    figures |= {"real_speedup_limit": f"{limit:.2f}"}
    if searches:
        figures |= gepa_figures(searches)
    ceiling = curves.workload.peak_tokens_per_s / curves.server.peak_tokens_per_s  # both in the probe's seconds
    figures |= {"utilization_ceiling": f"{physical_ratio('utilization_ceiling', ceiling):.3f}"}
    figures |= work_figures(combee.work)
    figures |= {"train": str(args.train), "test": str(args.test), "load_start": f"{load_start:.1f}",
                "load_end": f"{os.getloadavg()[0]:.1f}"}
    print(f"report: {write_page(out, curves, runs, searches, figures, args)}", file=sys.stderr)
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--train", type=int, default=12, help="train[0:N]: the examples each method learns from")
    parser.add_argument("--test", type=int, default=24, help="test[0:M]: the examples each playbook is scored on")
    parser.add_argument("--val", type=int, default=2, help="selection[0:V]: the validation after the last step")
    parser.add_argument("--max-rounds", type=int, default=0,
                        help="regenerations after a wrong answer (each one a generator and a reflector call)")
    parser.add_argument("--max-slots", type=int, default=4, help="the probe's server slots (most requests at once)")
    parser.add_argument("--threads", type=int, default=2, help="the local server's CPU threads")
    parser.add_argument("--probe-s", type=float, default=120.0, help="the batching probe's time budget (seconds)")
    parser.add_argument("--gepa-budget", type=int, default=36,
                        help="metric calls of each GEPA search (serial gepa, async-gepa); 0: no GEPA runs")
    parser.add_argument("--gepa-minibatch", type=int, default=GepaConfig().minibatch,
                        help="examples each GEPA proposal is judged on (both searches)")
    parser.add_argument("--gepa-only", action="store_true",
                        help="the GEPA pair alone (no probe, no ACE runs): its figures and load on the last line")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--sim", action="store_true", help="the simulated endpoint instead of the local model")
    parser.add_argument("--time-scale", type=float, default=0.02, help="--sim: real seconds per simulated second")
    parser.add_argument("--out", default=None, help="the page's folder (default runs/real-model-<date-time>)")
    args = parser.parse_args()
    if args.gepa_only and args.gepa_budget < 1:
        print("bench/real_model.py: --gepa-only needs --gepa-budget of at least 1 metric call", file=sys.stderr)
        return 2
    try:
        figures = run(bench(args))
    except CombeeError as exc:  # a bad flag, an --out holding runs, a model not installed, a dead server
        print(f"bench/real_model.py: {exc}", file=sys.stderr)
        return 2
    print(figures_line(figures))
    return 0


if __name__ == "__main__":
    sys.exit(guarded(main, "bench/real_model.py"))
