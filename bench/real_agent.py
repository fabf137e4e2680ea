"""A real agent: the built-in ReAct agent on Qwen2.5-Coder-1.5B-Instruct, before and after Combee learns.

    python bench/real_agent.py                       # the local model (the qwen-coder-1-5b extra), ~30 min here
    python bench/real_agent.py --families 6 --slots 1
    python bench/real_agent.py --sim                 # the same plumbing on the simulated endpoint (seconds)

The chores: the first chore of each of the terminal task's first ``--families`` families (in the
bundled splits' order), from the train split to learn on and from the test split to score, written
into the run folder (``chores/``) as the task's data. The model: the ``qwen2.5-coder-1.5b`` local
model on the project's own local server (:class:`~combee_fast.endpoint.local.LocalServer`:
llama.cpp's native server, ``--slots`` requests decoded at once by continuous batching,
``--threads`` CPU threads). One session: the test chores with the empty playbook (before), one
Combee step of ACE over every train chore (one batch: each episode, its reflection, the curators
and the reducer, no retry round), the test chores with the learned playbook (after); every
episode in a bubblewrap sandbox, at most ``--max-steps`` model turns.

Sizing (measured here before choosing, 2 threads, load 6-10: other workers' model servers shared
the 2 cores): one agent turn of the 1.5B model took 38-55 s alone (prompts read at 8-19 tokens/s,
33-78 tokens generated at 0.9-2.7 tokens/s under the JSON action's grammar) and 60-85 s with two at
once (0.6 tokens/s each), a 4-turn episode 194 s alone; a reflection (1,146 prompt tokens, 180 out)
255 s, a curation 155 s. Nineteen families (57 episodes, 19 reflections) would take hours. A first
full run with 3 families was stopped after 17 minutes: the executor's default episode limit
(``executor.episode_timeout_s``, 300 s) cut the episodes two at a time took, so their outcome was
the clock's, not the model's; here each episode has :data:`EPISODE_TIMEOUT_S`. :data:`FAMILIES`
families (``3 x FAMILIES`` episodes, ``FAMILIES`` reflections, a curation or two and a reduction:
about 36 minutes of one stream at load 6) took 15 minutes at 2 slots once the load fell to 2-4
(docs/agents.md); 3 families were on course for about 50 minutes at load 6-10. :data:`MAX_STEPS` turns (look, act, check, finish) is what a chore needs; the
roles keep their own max tokens (every reply measured was 30-180 tokens, far below them).
:data:`SLOTS`: asked for 48 tokens, two requests at once generated 1.61x and 1.0x the tokens per
second of one alone (two tries; the load moved under them), so two slots never lost and run two
episodes at once.

The bench refuses (one line, exit 1) figures that would not measure the model: an evaluation
whose episodes mostly never reached the model (``model_call`` and the other unanswered kinds), or
a learning step that ran no episode. A learning step that kept no lesson (a small model's curator
whose every proposed entry the playbook rejected: it happened here) is a finding, not a failure:
the after pass runs the empty playbook again and ``lessons=0`` says so. A missing model is one
line and exit 2. It writes
``report.md`` and ``success.png`` (success per family, before and after) into the run folder,
``episodes.jsonl`` (every episode's trajectory: test before, train, test after) and the learning run's own folder
(``learn/``).

Last line: ``success_before=<share of test chores solved> success_after=<share> episodes=<test
and train episodes run> s_per_episode=<mean seconds of one episode: model plus environment>
wall_s=<the bench's seconds> families=<n> slots=<n> lessons=<entries learned> model=<name> load_avg=<1-min load at the
end> failures_before=<kind:count,...> failures_after=<kind:count,...>``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import msgspec

from combee_fast.config import (AgentConfig, CacheConfig, ExecutorConfig, LocalConfig, MapConfig, SessionConfig, TaskConfig,
                                TrainConfig)
from combee_fast.endpoint.models import local_model, model_file
from combee_fast.engine.events import EpisodeFinished
from combee_fast.engine.loop import run
from combee_fast.errors import ConfigError, NothingLearned
from combee_fast.rollouts.episode import UNANSWERED_KINDS
from combee_fast.run.batch_plans import FixedBatch
from combee_fast.run.events import on_kind
from combee_fast.schema import Example, Trajectory
from combee_fast.session import Session, open_session
from combee_fast.tasks.ace_format import DATA_DIR
from combee_fast.tasks.terminal.task import SPLIT_FILES

MODEL = "qwen2.5-coder-1.5b"
FAMILIES = 2
SLOTS = 2
THREADS = 2
MAX_STEPS = 4
EPISODE_TIMEOUT_S = 1500.0
SOLVED, WRONG, STEP_CAP = "solved", "checks_failed", "step_cap"
"""An episode's outcome besides its error kind: the checks passed; the agent finished but a check
failed; it never finished within the step cap."""


class Pass(msgspec.Struct, frozen=True):
    """One pass over the test chores: each episode's trajectory and family, in the chores' order."""

    name: str
    families: tuple[str, ...]
    trajectories: tuple[Trajectory, ...]

    @property
    def success(self) -> float:
        return sum(t.reward >= 1.0 for t in self.trajectories) / len(self.trajectories)

    def outcomes(self) -> list[str]:
        return [outcome(t) for t in self.trajectories]

    def unanswered(self) -> int:
        return sum(t.call_error is not None and t.call_error.kind in UNANSWERED_KINDS for t in self.trajectories)


def outcome(trajectory: Trajectory) -> str:
    """The episode's outcome: :data:`SOLVED`, its error kind, :data:`WRONG` or :data:`STEP_CAP`."""
    if trajectory.reward >= 1.0:
        return SOLVED
    if trajectory.error is not None:
        return trajectory.error.kind
    return WRONG if trajectory.finished else STEP_CAP


def write_chores(folder: Path, families: int) -> list[str]:
    """Write the task's data into ``folder``: the first chore of each of the first ``families``
    families of the bundled train and test splits (the selection split as bundled); the families."""
    folder.mkdir(parents=True)
    chosen: list[str] = []
    for split, file in SPLIT_FILES.items():
        rows = (DATA_DIR / file).read_bytes().splitlines(keepends=True)
        if split == "selection":
            (folder / file).write_bytes(b"".join(rows))
            continue
        kept: dict[str, bytes] = {}
        for row in rows:
            family = msgspec.json.decode(row)["family"]
            if family not in kept and len(kept) < families:
                kept[family] = row
        (folder / file).write_bytes(b"".join(kept.values()))
        chosen = list(kept)
    if len(chosen) < families:
        raise ConfigError(f"--families {families}: the terminal task has {len(chosen)}")
    return chosen


def session_config(args: argparse.Namespace, chores: Path, replies: Path) -> SessionConfig:
    """ACE's Combee on ``chores``: one pass, no validation, no retry round, ``args.slots`` episodes
    at once, each within :data:`EPISODE_TIMEOUT_S`, on the local model (or the simulated endpoint
    with ``--sim``); every reply recorded in ``replies`` (the record cache's JSON lines: role,
    text, usage)."""
    local = None if args.sim else LocalConfig(name=MODEL, threads=args.threads, slots=args.slots)
    return SessionConfig(method="combee", seed=args.seed,
                         task=TaskConfig(name="terminal", options={"data_dir": str(chores)}, train_split="train",
                                         val_split="selection[0:0]"),
                         train=TrainConfig(epochs=1), map=MapConfig(max_rounds=0, workers=args.slots),
                         agent=AgentConfig(max_steps=args.max_steps),
                         executor=ExecutorConfig(episode_timeout_s=EPISODE_TIMEOUT_S), local=local,
                         cache=CacheConfig(path=str(replies), mode="record"))


async def scored_pass(session: Session, name: str, artifact: object, examples: Sequence[Example]) -> Pass:
    """The test chores' episodes with ``artifact`` (a playbook), each one's trajectory kept."""
    seen: dict[str, Trajectory] = {}
    keep = on_kind(EpisodeFinished, lambda event: seen.__setitem__(event.example.id, event.trajectory))
    consumer = session.events.subscribe(keep)
    try:
        await session.evaluate(artifact, examples)
    finally:
        session.events.unsubscribe(consumer)
    missing = [e.id for e in examples if e.id not in seen]
    if missing:
        sys.exit(f"bench/real_agent.py: the {name} pass ran no episode for {', '.join(missing)}")
    return Pass(name, tuple(e.meta["family"] for e in examples), tuple(seen[e.id] for e in examples))


def check_pass(result: Pass) -> None:
    """Refuse (exit 1) a pass whose episodes mostly never reached the model: its success rate
    would say nothing of the model."""
    unanswered = result.unanswered()
    if 2 * unanswered > len(result.trajectories):
        first = next(t.call_error for t in result.trajectories if t.call_error is not None)
        sys.exit(f"bench/real_agent.py: {unanswered} of the {len(result.trajectories)} {result.name} episodes never "
                 f"reached the model ({first.kind}: {first.message[:160]}); no figure")


async def measure(args: argparse.Namespace, out: Path) -> tuple[Pass, Pass, int, list[str], list[Trajectory], str]:
    """Before, learn, after in one session: both test passes, the train episodes run, the learned
    playbook's entries, every trajectory, and why nothing was learned ('' when something was: a
    step whose every proposed lesson was rejected ends the learning run with
    :class:`~combee_fast.errors.NothingLearned`; the after pass then runs the empty playbook again,
    measured like any other)."""
    families = write_chores(out / "chores", args.families)
    print(f"bench/real_agent.py: {len(families)} families ({', '.join(families)}); run folder {out}",
          file=sys.stderr, flush=True)
    config = session_config(args, out / "chores", out / "replies.cache")
    async with open_session(config) as session:
        kind = session.choice.kind
        test = session.task.load("test").examples
        final, nothing = kind.initial(config), ""
        before = await scored_pass(session, "before", kind.deployable(final), test)
        check_pass(before)
        trained: list[Trajectory] = []
        learned = session.events.subscribe(on_kind(EpisodeFinished, lambda e: trained.append(e.trajectory)))
        try:
            final = (await session.train(plan=FixedBatch(len(session.train_split.examples)), out=out / "learn")).final
        except NothingLearned as exc:
            nothing = str(exc)
        finally:
            session.events.unsubscribe(learned)
        if not trained:
            sys.exit("bench/real_agent.py: the learning step ran no episode; no figure")
        after = await scored_pass(session, "after", kind.deployable(final), test)
        check_pass(after)
        lessons = kind.lessons(final)
    return before, after, len(trained), lessons, [*before.trajectories, *trained, *after.trajectories], nothing


def per_family(result: Pass) -> dict[str, float]:
    """Share of each family's test chores solved (one chore each here)."""
    solved: dict[str, list[float]] = {}
    for family, trajectory in zip(result.families, result.trajectories):
        solved.setdefault(family, []).append(float(trajectory.reward >= 1.0))
    return {family: sum(values) / len(values) for family, values in solved.items()}


def kinds(result: Pass) -> str:
    """``kind:count,...`` of a pass's outcomes, most frequent first."""
    return ",".join(f"{kind}:{count}" for kind, count in Counter(result.outcomes()).most_common())


def plot(before: Pass, after: Pass, path: Path) -> None:
    """Success per family, before and after learning, as a bar chart in ``path``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    first, second = per_family(before), per_family(after)
    names = list(first)
    x = range(len(names))
    figure, axes = plt.subplots(figsize=(max(4.0, 1.2 * len(names)), 3.2))
    axes.bar([i - 0.2 for i in x], [first[n] for n in names], 0.4, label="before (empty playbook)")
    axes.bar([i + 0.2 for i in x], [second[n] for n in names], 0.4, label="after Combee")
    axes.set_xticks(list(x), names, rotation=20, ha="right", fontsize=8)
    axes.set_ylim(0, 1.05)
    axes.set_ylabel("test chores solved")
    axes.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def report(before: Pass, after: Pass, lessons: list[str], figures: dict[str, str], command: str, nothing: str) -> str:
    """The run folder's ``report.md``: the command, the figures, a row per family, the lessons
    (or why there are none: ``nothing``)."""
    first, second = per_family(before), per_family(after)
    lines = ["# A real agent: ReAct on the terminal task, before and after Combee", "", f"`{command}`", "",
             " ".join(f"`{key}={value}`" for key, value in figures.items()), "",
             "| family | before | outcome | after | outcome |", "|---|---|---|---|---|"]
    for family, was, now, was_kind, now_kind in zip(first, first.values(), second.values(), before.outcomes(),
                                                    after.outcomes()):
        lines.append(f"| {family} | {was:.0%} | {was_kind} | {now:.0%} | {now_kind} |")
    lines += ["", "![success per family](success.png)", "", f"## The learned playbook ({len(lessons)} entries)", ""]
    lines += [f"- {lesson}" for lesson in lessons] or [f"(empty: {nothing or 'no lesson kept'})"]
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description="The built-in ReAct agent on a real local model, before and after "
                                                 "Combee learns (terminal task)")
    parser.add_argument("--families", type=int, default=FAMILIES, help="families: one train and one test chore each")
    parser.add_argument("--slots", type=int, default=SLOTS, help="requests the server decodes at once")
    parser.add_argument("--threads", type=int, default=THREADS, help="the server's CPU threads")
    parser.add_argument("--max-steps", type=int, default=MAX_STEPS, help="model turns an episode may take")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=None, help="the run folder (default runs/real_agent-<time>)")
    parser.add_argument("--sim", action="store_true", help="the simulated endpoint instead of the local model")
    args = parser.parse_args()
    out = args.out or Path("runs") / time.strftime("real_agent-%Y%m%d-%H%M%S")
    if out.exists():
        print(f"bench/real_agent.py: {out} exists; name a new run folder with --out", file=sys.stderr)
        return 2
    model = "simulated" if args.sim else MODEL
    try:
        if not args.sim:
            model_file(local_model(MODEL))  # assembled once, before any server starts
        started = time.perf_counter()
        before, after, trained, lessons, trajectories, nothing = run(measure(args, out))
    except ConfigError as exc:
        print(f"bench/real_agent.py: {exc}", file=sys.stderr)
        return 2
    wall = time.perf_counter() - started
    episodes = len(trajectories)
    figures = {"success_before": f"{before.success:.3f}", "success_after": f"{after.success:.3f}",
               "episodes": str(episodes),
               "s_per_episode": f"{sum(t.model_seconds + t.env_seconds for t in trajectories) / episodes:.1f}",
               "wall_s": f"{wall:.0f}", "families": str(len(before.families)), "slots": str(args.slots),
               "lessons": str(len(lessons)), "model": model, "load_avg": f"{os.getloadavg()[0]:.2f}",
               "failures_before": kinds(before), "failures_after": kinds(after)}
    if trained + 2 * len(before.trajectories) != episodes:
        print(f"bench/real_agent.py: {episodes} trajectories seen, {trained} train episodes and "
              f"{2 * len(before.trajectories)} test ones run; no figure", file=sys.stderr)
        return 1
    with (out / "episodes.jsonl").open("wb") as file:
        for trajectory in trajectories:
            file.write(msgspec.json.encode(trajectory) + b"\n")
    plot(before, after, out / "success.png")
    (out / "report.md").write_text(report(before, after, lessons, figures, " ".join(["python", *sys.argv]), nothing))
    print(f"{'family':<22}{'before':>8}{'after':>8}  outcome before -> after", file=sys.stderr)
    for family, was, now, was_kind, now_kind in zip(before.families, per_family(before).values(),
                                                    per_family(after).values(), before.outcomes(), after.outcomes()):
        print(f"{family:<22}{was:>8.0%}{now:>8.0%}  {was_kind} -> {now_kind}", file=sys.stderr)
    if nothing:
        print(f"learned nothing: {nothing}", file=sys.stderr)
    print(f"report: {out / 'report.md'}", file=sys.stderr)
    print(" ".join(f"{key}={value}" for key, value in figures.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
