"""``combee``: learn, evaluate, demo, and the simulated endpoint.

Bad flags and unreachable endpoints print one line naming the problem and exit with code 2; a
run stopped because its calls mostly failed prints one line and exits 3 (the exit codes are
defined in :mod:`combee_fast.errors`).
"""

from __future__ import annotations

import argparse
import shlex
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn

import msgspec

from combee_fast import flags
from combee_fast.config import ROLES
from combee_fast.errors import (
    EXIT_INTERRUPTED, EXIT_OK, EXIT_STORAGE, EXIT_USAGE, CallsFailed, CombeeError, ConfigError, SplitChangedError,
)
from combee_fast.redact import escape_control, scrub
from combee_fast.run.ledger import LedgerRow
from combee_fast.sim import cli as sim_cli
from combee_fast.verify import cli as verify_cli


class _Parser(argparse.ArgumentParser):
    """Reports a bad flag in one line (no usage dump) and exits 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"{self.prog}: error: {escape_control(scrub(message))} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="combee", description="Parallel prompt learning (Combee) on a streaming engine.")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    learn = commands.add_parser("learn", help="learn a playbook (ACE) or a prompt (GEPA) from a task's train split")
    flags.add_task_flags(learn)
    flags.add_learn_flags(learn)
    learn.add_argument("--out", help="run directory (default: runs/<task>-<method>-<date-time>)")
    learn.add_argument("--overwrite", action="store_true", help="replace the run already in --out")
    learn.add_argument("--quiet", action="store_true", help="no progress lines")
    learn.add_argument("--resume", metavar="RUN_DIR",
                       help="continue the run in RUN_DIR from its last completed step, with its own config.json "
                            "(after kill -9, SIGINT or SIGTERM); other learn flags are refused")
    learn.add_argument("--gpus", type=flags.positive_int,
                       help="GPUs serving the endpoints, for GPU-seconds (default: the --card's hardware class the run "
                            "is on, else 1 on the simulated endpoint and unknown on a real one)")
    learn.add_argument("--card", help="an experiment card: learn on its train split, select on its selection split, "
                                      "record the uses beside it")
    flags.add_endpoint_flags(learn)

    evaluate = commands.add_parser("eval", help="score a run's final.json or best.json on a split")
    flags.add_task_flags(evaluate)
    evaluate.add_argument("--split", default="val", help="split name, optionally sliced: val[0:100]")
    evaluate.add_argument("--playbook", required=True,
                          help="a run's final.json or best.json, of any learner (a playbook, a GEPA candidate)")
    evaluate.add_argument("--card", help="an experiment card: record this report in its usage record")
    flags.add_endpoint_flags(evaluate)

    demo = commands.add_parser("demo", help="sequential vs naive vs combee on Formula, simulated endpoint")
    demo.add_argument("--train-limit", type=flags.positive_int, default=500, help="train examples to learn from")
    demo.add_argument("--out", help="report folder (default: runs/demo-<date-time>)")

    sim_cli.register(commands)
    verify_cli.register(commands)
    return parser


def _progress(row: LedgerRow) -> None:
    val = "" if row.val_accuracy is None else f"  val {100 * row.val_accuracy:.1f}%"
    first_try = f"  first-try {100 * row.first_try_accuracy:.0f}%" if row.batch_size else ""
    errors = f"  errors {len(row.errors)}" if row.errors else ""
    if row.val_unanswered:
        val += f" of {row.val_answered} answered ({row.val_unanswered} unanswered)"
    print(
        f"[{row.method}] epoch {row.epoch + 1} step {row.step + 1}  batch {row.batch_size} ({row.batch_reason})"
        f"  sim {row.cumulative_sim_seconds:,.0f} s  size {row.size}{first_try}{errors}{val}",
        file=sys.stderr,
        flush=True,
    )


NOTICE_EVERY_S = 1.0
"""Fewest seconds between two "waiting on Retry-After" lines."""


class _RetryAfterNotice:
    """Says on stderr when a call waits because a server asked (Retry-After): at most one line a
    second, counting the waits since the previous line."""

    def __init__(self) -> None:
        self._last = -NOTICE_EVERY_S
        self._waits = 0

    def __call__(self, endpoint: str, seconds: float) -> None:
        self._waits += 1
        now = time.monotonic()
        if now - self._last >= NOTICE_EVERY_S:
            print(f"[waiting] {escape_control(endpoint)} asked to wait {seconds:g} s (Retry-After); "
                  f"{self._waits} call(s) told to wait since the last notice", file=sys.stderr, flush=True)
            self._last, self._waits = now, 0


def _overload_notice(endpoint: str, limit: int) -> None:
    print(f"[overload] {escape_control(endpoint)}: a request timed out; at most {limit} request(s) in flight "
          "from now on, growing back as answers come", file=sys.stderr, flush=True)


def _notify_waits(session: Any, quiet: bool) -> None:
    """Say on stderr when a server asks calls to wait (Retry-After) and when a timeout lowers
    the requests in flight (every replica of every role's endpoint)."""
    if quiet:
        return
    notice = _RetryAfterNotice()
    for role in ROLES:
        for client in session.clients.replicas(role):  # a client serving several roles is set again: harmless
            client.on_retry_after = notice
            client.on_overload = _overload_notice


async def _learn(args: argparse.Namespace) -> int:
    from combee_fast.learners import resolve
    from combee_fast.run.interrupt import StopRequest
    from combee_fast.run.rundir import RunDir, check_run_target
    from combee_fast.session import open_session

    if args.resume:
        return await _resume(args)
    config = flags.session_config(args)
    choice = resolve(config.learner, config.method)
    if getattr(args, "cfg__train__batch_size", None) is not None and choice.kind.batch_size(choice.method, config) != \
            config.train.batch_size:
        raise ConfigError(f"--batch-size is ACE's; learner {choice.kind.name} takes its minibatch from --minibatch "
                          "(serial) and --combee-minibatch")
    out = args.out or f"runs/{config.task.name}-{choice.shown}-{time.strftime('%Y%m%d-%H%M%S')}"
    check_run_target(out, overwrite=args.overwrite)
    usage, gpus, stops = None, args.gpus, ()
    if args.card:
        from combee_fast.verify.discipline import learn_under_card

        usage, card_gpus, budget = learn_under_card(args.card, config, run=out)
        gpus, stops = gpus or card_gpus, (budget,)
    async with open_session(config) as session:
        session.split_uses(usage.roles if usage is not None else None)  # a test-split use is refused before --out is made
        run_dir = RunDir(out, overwrite=args.overwrite)
        _notify_waits(session, args.quiet)
        interrupt = StopRequest()
        interrupt.install()
        try:
            result = await session.train(run_dir=run_dir, on_step=None if args.quiet else _progress, usage=usage,
                                         gpus=gpus, interrupt=interrupt, stops=stops)
        finally:
            interrupt.uninstall()
            if run_dir.started:
                session.keep_local_log(run_dir)
            run_dir.close()
    return _finish(result, run_dir, _shown(out, run_dir), interrupt)


def _shown(out: str, run_dir: Any) -> str:
    """Where the run's files are, as the user named it when it is there."""
    return out if run_dir.location == Path(out) else str(run_dir.location)


async def _resume(args: argparse.Namespace) -> int:
    """``learn --resume RUN_DIR``: the run's own configuration and card budget, splits checked, its checkpoint."""
    from combee_fast.run.interrupt import StopRequest
    from combee_fast.run.rundir import RunDir
    from combee_fast.session import open_session
    from combee_fast.tasks.base import verify_split

    given = [name for name, value in vars(args).items()
             if name not in ("command", "resume", "quiet", "gpus", "task_option") and value not in (None, False, [])]
    if given or args.task_option:
        raise ConfigError(f"--resume continues a run with its own config.json; drop "
                          f"{', '.join('--' + name.removeprefix('cfg__').split('__')[-1].replace('_', '-') for name in given) or '--task-option'}")
    out = args.resume
    run_dir = RunDir.reopen(out)
    try:
        config = run_dir.read_config()
        stops = ()
        if (card := run_dir.card_file()) is not None:
            from combee_fast.verify.discipline import card_budget

            stops = (card_budget(card),)
        async with open_session(config) as session:
            recorded = run_dir.read_splits()
            if len(recorded) != 2:
                raise SplitChangedError(f"{run_dir.root / 'splits.json'} records {len(recorded)} splits, not the train "
                                        "and validation splits of the run; refusing to resume")
            for split, manifest in zip((session.train_split, session.val_split), recorded):
                verify_split(split, manifest)
            _notify_waits(session, args.quiet)
            interrupt = StopRequest()
            interrupt.install()
            resumed_from = run_dir.resumed.steps  # type: ignore[union-attr]
            try:
                result = await session.train(run_dir=run_dir, on_step=None if args.quiet else _progress,
                                             gpus=args.gpus, interrupt=interrupt, stops=stops)
            finally:
                interrupt.uninstall()
    finally:
        run_dir.close()
    return _finish(result, run_dir, out, interrupt, resumed_from=resumed_from)


def _finish(result: Any, run_dir: Any, out: str, interrupt: Any, *, resumed_from: int | None = None) -> int:
    """Write ``summary.json`` (marked interrupted, with the resume command, when stopped by a
    signal), print it; the exit code."""
    summary = {
        "learner": result.learner, "method": result.method, "samples": result.samples, "calls": result.calls,
        "tokens": result.tokens, "rollouts": result.rollouts,
        "gpu_seconds": None if result.gpu_seconds is None else round(result.gpu_seconds, 3),
        "train_sim_seconds": round(result.train_sim_seconds, 3),
        "train_wall_seconds": round(result.train_wall_seconds, 3),
        "final_val_accuracy": None if result.final_eval is None else result.final_eval.accuracy,
        "best_val_accuracy": result.best_val_accuracy, **result.summary,
        "run_dir": out,
        "final_val_answered": None if result.final_eval is None else result.final_eval.answered,
        "final_val_unanswered": None if result.final_eval is None else result.final_eval.unanswered,
        "accounting": {"train": msgspec.to_builtins(result.counts),
                       "validation": msgspec.to_builtins(result.val_counts)},
    }
    if resumed_from is not None:
        summary["resumed_from_step"] = resumed_from
    if result.interrupted:
        command = f"combee learn --resume {shlex.quote(out)}"
        summary.update(interrupted=interrupt.requested, steps_completed=result.steps, resume_command=command)
    if result.stopped_by is not None:
        summary["stopped_by"] = result.stopped_by
        print(f"combee learn: stopped early: {result.stopped_by}", file=sys.stderr)
    run_dir.write_summary(summary)
    print(msgspec.json.encode(summary).decode())
    if result.interrupted:
        print(f"combee learn: interrupted by {interrupt.requested} after step {result.steps}; "
              f"the artifact so far is in {Path(out) / 'final.json'}; resume with: {command}", file=sys.stderr)
        return EXIT_INTERRUPTED
    return EXIT_OK


async def _eval(args: argparse.Namespace) -> int:
    from combee_fast.learners import kind_of_file
    from combee_fast.run.rundir import read_split_manifests
    from combee_fast.session import open_session
    from combee_fast.tasks.base import verify_split

    kind, deployable = kind_of_file(args.playbook)
    config = flags.session_config(args, [(("task", "val_split"), args.split), (("task", "train_split"), args.split)])
    async with open_session(config) as session:
        manifests_file = Path(args.playbook).with_name("splits.json")
        if manifests_file.exists():
            recorded = read_split_manifests(manifests_file, what=f"the split hashes of {args.playbook}")
            for manifest in recorded:
                if (manifest.task, manifest.split) == (session.task.name, args.split):
                    verify_split(session.val_split, manifest)
        result = await session.evaluate(deployable, session.val_split.examples, learner=kind.name)
        if args.card:
            from combee_fast.verify.discipline import record_report

            record_report(args.card, config, session.task, session.val_split, run=f"eval {args.playbook}")
    report = {"examples": result.examples, "accuracy": result.accuracy, "answered": result.answered,
              "unanswered": result.unanswered, "unanswered_by_kind": result.unanswered_by_kind}
    print(msgspec.json.encode({"split": args.split, "learner": kind.name, **report}).decode())
    if result.unanswered > config.train.max_failed_fraction * result.examples:
        kinds = ", ".join(f"{kind} {n}" for kind, n in result.unanswered_by_kind.items())
        raise CallsFailed(f"{result.unanswered} of {result.examples} examples of {args.split} unanswered "
                          f"({kinds}); the accuracy covers only the {result.answered} answered")
    return EXIT_OK


async def _demo(args: argparse.Namespace) -> int:
    from combee_fast.demo import run_demo

    await run_demo(train_limit=args.train_limit, out=args.out)
    return EXIT_OK


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    handlers = {"learn": _learn, "eval": _eval, "demo": _demo}
    if args.command not in handlers:
        return args.handler(args)
    try:
        from combee_fast.engine.loop import run

        return run(handlers[args.command](args))
    except CombeeError as exc:  # user text escaped (ESC, BEL...), URL credentials dropped
        print(f"combee {args.command}: error: {escape_control(scrub(str(exc)))}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print(f"combee {args.command}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except OSError as exc:  # the machine: a full disk, an I/O error, a file gone read-only
        where = f" ({exc.filename})" if exc.filename else ""
        print(f"combee {args.command}: error: {escape_control(scrub(exc.strerror or str(exc)))}{escape_control(where)}",
              file=sys.stderr)
        return EXIT_STORAGE


if __name__ == "__main__":
    sys.exit(main())
