"""``combee``: learn, evaluate, demo, and the simulated endpoint.

Bad flags and unreachable endpoints print one line naming the problem and exit with code 2; a
run stopped because its calls mostly failed prints one line and exits 3 (the exit codes are
defined in :mod:`combee_fast.errors`).
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn, cast

import msgspec

from combee_fast import flags
from combee_fast.errors import (
    EXIT_INTERRUPTED, EXIT_OK, EXIT_STORAGE, EXIT_USAGE, CallsFailed, CombeeError, ConfigError, SplitChangedError,
)
from combee_fast.redact import escape_control, scrub
from combee_fast.sim import cli as sim_cli
from combee_fast.suggest import did_you_mean
from combee_fast.verify import cli as verify_cli


_INVALID_CHOICE = re.compile(r"invalid choice: '([^']*)' \(choose from ([^)]*)\)")
"""argparse's refusal of a value not among an argument's choices (a command, a --staleness...)."""
_QUOTED = re.compile(r"'([^']*)'")


class _Parser(argparse.ArgumentParser):
    """Reports a bad flag in one line (no usage dump) and exits 2; a mistyped flag or command
    is told the closest one."""

    def error(self, message: str) -> NoReturn:
        choice = _INVALID_CHOICE.search(message)
        if choice is not None:
            message = message.replace(choice[0], choice[0] + did_you_mean(choice[1], _QUOTED.findall(choice[2])))
        self.exit(EXIT_USAGE, f"{self.prog}: error: {escape_control(scrub(message))} (see {self.prog} --help)\n")

    def unrecognized(self, extra: Sequence[str]) -> NoReturn:
        """Refuse the arguments no flag took, suggesting the closest flag of this parser."""
        flag = next((arg.split("=", 1)[0] for arg in extra if arg.startswith("--")), None)
        known = [option for action in self._actions for option in action.option_strings]
        hint = did_you_mean(flag, known) if flag is not None else ""
        self.error(f"unrecognized arguments: {' '.join(extra)}{hint}")


def _parse(parser: argparse.ArgumentParser, argv: Sequence[str] | None) -> argparse.Namespace:
    """``argv`` parsed; an argument no flag takes is refused by its command's parser, which
    names the closest flag it has (argparse's own refusal names none)."""
    args, extra = parser.parse_known_args(argv)
    if extra:
        commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        command = commands.choices.get(args.command, parser)
        cast(_Parser, command).unrecognized(extra)
    return args


def _named_learners(argv: Sequence[str]) -> list[str]:
    """The learners ``argv`` names with ``--learner NAME`` (``learn`` offers their own flags too)."""
    named = [value for flag, value in zip(argv, argv[1:]) if flag == "--learner"]
    return named + [arg.split("=", 1)[1] for arg in argv if arg.startswith("--learner=")]


def build_parser(argv: Sequence[str] = ()) -> argparse.ArgumentParser:
    """The ``combee`` parser; ``learn`` also takes the own flags of a learner ``argv`` names
    (a plug-in's: the built-in learners' are always there)."""
    from combee_fast import __version__

    parser = _Parser(prog="combee", description="Parallel prompt learning (Combee) on a streaming engine.")
    parser.add_argument("--version", action="version", version=f"combee {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    learn = commands.add_parser("learn", help="learn a playbook (ACE) or a prompt (GEPA, TextGrad) from a task's "
                                              "train split")
    flags.add_task_flags(learn)
    flags.add_learn_flags(learn, _named_learners(argv))
    learn.add_argument("--out", help="run directory (default: runs/<task>-<method>-<date-time>)")
    learn.add_argument("--overwrite", action="store_true", help="replace the run already in --out")
    learn.add_argument("--quiet", action="store_true", help="no progress lines")
    _add_heartbeat_flag(learn)
    learn.add_argument("--resume", metavar="RUN_DIR",
                       help="continue the run in RUN_DIR from its last completed step, with its own config.json "
                            "(after kill -9, SIGINT or SIGTERM); other learn flags are refused")
    learn.add_argument("--gpus", type=flags.positive_int,
                       help="GPUs serving the endpoints, for GPU-seconds (default: the --card's hardware class the run "
                            "is on, else 1 on the simulated endpoint and unknown on a real one)")
    learn.add_argument("--card", help="an experiment card: learn on its train split, select on its selection split, "
                                      "record the uses beside it")
    flags.add_endpoint_flags(learn)

    evaluate = commands.add_parser("eval", help="score a run's final.json or best.json on a split (default: test)")
    flags.add_task_flags(evaluate)
    evaluate.add_argument("--split", default="test",
                          help="split name, optionally sliced: test[0:50] (default: test, which is only reported on)")
    evaluate.add_argument("--artifact", "--playbook", dest="artifact", required=True, metavar="FILE",
                          help="a run's final.json or best.json, of any learner (a playbook, a GEPA candidate, a "
                               "TextGrad prompt); --playbook is its older name")
    evaluate.add_argument("--card", help="an experiment card: record this report in its usage record")
    evaluate.add_argument("--out", help="the evaluation's folder: eval.json, results.jsonl (per example), report.md, "
                                        "prompt.txt (default: eval-<split>-<date-time> beside --artifact)")
    evaluate.add_argument("--overwrite", action="store_true", help="replace the evaluation already in --out")
    _add_heartbeat_flag(evaluate)
    flags.add_endpoint_flags(evaluate)

    show = commands.add_parser("show", help="print a run's learned context (prompt.txt), ready to paste into an agent")
    show.add_argument("run", metavar="RUN", help="a run directory (or a final.json / best.json)")
    show.add_argument("--report", action="store_true", help="print the run's page (report.md) instead")

    compare = commands.add_parser("compare", help="tabulate runs side by side, and each configuration over its seeds")
    compare.add_argument("runs", metavar="RUN", nargs="+", help="run directories (learn or eval)")
    compare.add_argument("--paired", action="store_true",
                         help="two runs on the rows both scored: the paired difference with its interval and an "
                              "exact test (each run's evaluations' results.jsonl)")

    demo = commands.add_parser("demo", help="sequential vs naive vs combee on Formula, simulated endpoint")
    demo.add_argument("--train-limit", type=flags.positive_int, default=500, help="train examples to learn from")
    demo.add_argument("--out", help="report folder (default: runs/demo-<date-time>)")

    sim_cli.register(commands, _world_roles)
    verify_cli.register(commands)
    return parser


def _add_heartbeat_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--heartbeat", type=float, metavar="SECONDS",
                        help="while calls run, a [working] line after this many seconds without another line "
                             "(calls done, in flight, failed, tokens/s, what the work waits for; default 30)")


def _heartbeat(session: Any, args: argparse.Namespace, events: Any, work: str | None = None) -> Any:
    """The heartbeat (:mod:`combee_fast.readout.heartbeat`) of a run's steps, or of other ``work``, as
    a context to run it in, subscribed to ``events``; none with ``--quiet``."""
    import contextlib

    from combee_fast.readout.heartbeat import HEARTBEAT_S, Heartbeat

    if getattr(args, "quiet", False):
        return contextlib.nullcontext()
    if args.heartbeat is not None and not args.heartbeat > 0:
        raise ConfigError(f"--heartbeat must be a number of seconds > 0, got {args.heartbeat:g}")
    heartbeat = Heartbeat(session.calls, every_s=args.heartbeat or HEARTBEAT_S, work=work)
    events.subscribe(heartbeat)
    return heartbeat.running()


def _world_roles(learners: Sequence[str]) -> Any:
    """The role table ``sim-server``'s worlds answer: every registered learner's, and those of
    ``learners`` (its ``--learner`` paths)."""
    from combee_fast.learners import LEARNERS, role_table

    return role_table([*LEARNERS, *learners])


def _session_events(quiet: bool) -> Any:
    """The session's hub for ``open_session``: unless ``quiet``, it says on stderr what the
    session waits for (slow endpoint probes at its start, a server's Retry-After, a timeout
    lowering the requests in flight; every replica of every role's endpoint)."""
    from combee_fast.readout.notices import WaitNotices
    from combee_fast.run.events import Events

    return Events() if quiet else Events(WaitNotices())


async def _learn(args: argparse.Namespace) -> int:
    from combee_fast.learners import resolve
    from combee_fast.record.rundir import RunDir, check_run_target
    from combee_fast.session import open_session

    if args.resume:
        return await _resume(args)
    config = flags.session_config(args)
    choice = resolve(config.learner, config.method)
    if hasattr(args, "cfg__train__batch_size") and choice.kind.batch_size(choice.method, config) != \
            config.train.batch_size:
        raise ConfigError(f"--batch-size is ACE's (and 'auto' asks for the planner); learner {choice.kind.name}'s "
                          f"method {choice.shown} takes its minibatch from --minibatch (serial) or --combee-minibatch")
    out = args.out or _unused(f"runs/{config.task.name}-{choice.shown}-{time.strftime('%Y%m%d-%H%M%S')}")
    check_run_target(out, overwrite=args.overwrite)
    usage, gpus = None, args.gpus
    stops: tuple[Any, ...] = ()  # a card's budget
    if args.card:
        from combee_fast.verify.discipline import learn_under_card

        usage, card_gpus, budget = learn_under_card(args.card, config, run=out)
        gpus, stops = gpus or card_gpus, (budget,)
    tracker = _tracker(config, name=Path(out).name)  # before anything is made or a signal handler installed
    try:
        async with open_session(config, events=_session_events(args.quiet)) as session:
            session.split_uses(usage.roles if usage is not None else None)  # refused before --out is made
            run_dir = RunDir(out, overwrite=args.overwrite)
            tracked, tracker = tracker, None  # finished with the run's files from here on
            return await _learn_in(session, run_dir, args, config, out, tracked, usage=usage, gpus=gpus,
                                   stops=stops)
    finally:
        if tracker is not None:  # the session did not open: the MLflow run ends as failed, with no files
            tracker.finish(None, failed=True)


async def _learn_in(session: Any, run_dir: Any, args: argparse.Namespace, config: Any, out: str, tracker: Any, *,
                    usage: Any, gpus: Any, stops: tuple[Any, ...]) -> int:
    """The run of ``_learn`` in its open session and run directory: its events, its summary."""
    from combee_fast.readout.summary import failed_summary, shown_at
    from combee_fast.run.interrupt import StopRequest

    interrupt = StopRequest()
    interrupt.install()
    started = time.monotonic()  # as the progress's elapsed counts
    events, reruns = _run_events(session, args, tracker)
    failed = True
    try:
        async with _heartbeat(session, args, events):
            result = await session.train(run_dir=run_dir, usage=usage, gpus=gpus, interrupt=interrupt,
                                         stops=stops, events=events)
        code = _finish(result, run_dir, shown_at(out, run_dir), interrupt, val_split=config.task.val_split,
                       quiet=args.quiet, reruns=reruns.count, started=started)
        failed = False
    except CombeeError as exc:
        if run_dir.started:  # a retry's refusal then names this run as a failed one
            run_dir.write_summary(failed_summary(exc, shown_at(out, run_dir)))
        raise
    finally:
        interrupt.uninstall()
        if run_dir.started:
            session.keep_local_log(run_dir)
        if tracker is not None:
            tracker.finish(run_dir.root if run_dir.started else None, failed=failed)
        run_dir.close()
    return code


def _tracker(config: Any, *, name: str) -> Any:
    """The MLflow logger of the run (``tracking.mlflow``; None without it), started first, so an
    unreachable store or a missing package is one line before anything is made (and a signal
    meanwhile ends the process as usual)."""
    if not config.tracking.mlflow:
        return None
    from combee_fast.readout.mlflow_log import MlflowLogger

    return MlflowLogger.start(config, run_name=name)


def _run_events(session: Any, args: argparse.Namespace, tracker: Any,
                resumed: Sequence[Any] = ()) -> tuple[Any, Any]:
    """The run's event hub with what the command line asked to see or record: the progress (not
    with ``--quiet``; counting the ``resumed`` ledger rows of a resumed run's earlier sessions)
    and the MLflow logger ``tracker`` (if any: it is finished once the run's files are written);
    and the count of episodes re-run, for the summary."""
    from combee_fast.readout.summary import RerunCount
    from combee_fast.run.events import Events

    reruns = RerunCount()
    events = Events(reruns)
    if not args.quiet:
        events.subscribe(session.progress(resumed=resumed))
    if tracker is not None:
        events.subscribe(tracker)
    return events, reruns


async def _resume(args: argparse.Namespace) -> int:
    """``learn --resume RUN_DIR``: the run's own configuration and card budget, splits checked, its checkpoint."""
    from combee_fast.record.rundir import RunDir
    from combee_fast.run.interrupt import StopRequest
    from combee_fast.session import open_session
    from combee_fast.tasks.base import verify_split

    given = [name for name, value in vars(args).items()
             if name not in ("command", "resume", "quiet", "heartbeat", "gpus", "task_option")
             and value not in (None, False, [])]
    if given or args.task_option:
        raise ConfigError(f"--resume continues a run with its own config.json; drop "
                          f"{', '.join('--' + name.removeprefix('cfg__').split('__')[-1].replace('_', '-') for name in given) or '--task-option'}")
    out = args.resume
    run_dir = RunDir.reopen(out)
    try:
        config = run_dir.read_config()
        stops: tuple[Any, ...] = ()
        if (card := run_dir.card_file()) is not None:
            from combee_fast.verify.discipline import card_budget

            stops = (card_budget(card),)
        tracker = _tracker(config, name=Path(out).name)  # before the session opens or a signal handler is installed
        failed = True
        try:
            async with open_session(config, events=_session_events(args.quiet)) as session:
                recorded = run_dir.read_splits()
                if len(recorded) != 2:
                    raise SplitChangedError(f"{run_dir.root / 'splits.json'} records {len(recorded)} splits, not the "
                                            "train and validation splits of the run; refusing to resume")
                for split, manifest in zip((session.train_split, session.val_split), recorded):
                    verify_split(split, manifest)
                interrupt = StopRequest()
                interrupt.install()
                resumed_from = run_dir.resumed.steps  # type: ignore[union-attr]
                started = time.monotonic()  # as the progress's elapsed counts
                events, reruns = _run_events(session, args, tracker, resumed=run_dir.read_ledger())
                try:
                    async with _heartbeat(session, args, events):
                        result = await session.train(run_dir=run_dir, gpus=args.gpus, interrupt=interrupt,
                                                     stops=stops, events=events)
                    code = _finish(result, run_dir, out, interrupt, val_split=config.task.val_split, quiet=args.quiet,
                                   resumed_from=resumed_from, reruns=reruns.count, started=started)
                    failed = False
                finally:
                    interrupt.uninstall()
        finally:
            if tracker is not None:
                tracker.finish(run_dir.root, failed=failed)
    finally:
        run_dir.close()
    return code


def _finish(result: Any, run_dir: Any, out: str, interrupt: Any, *, val_split: str, quiet: bool,
            resumed_from: int | None = None, reruns: int = 0, started: float | None = None) -> int:
    """Write ``summary.json`` (marked interrupted, with the resume command, when stopped by a
    signal), print it, and (not ``quiet``) the human summary on stderr; the exit code.
    ``reruns``: episodes sent again after their worker was lost; ``started``: when the run's
    progress began counting (:func:`time.monotonic`)."""
    from combee_fast.readout.summary import resume_command, run_summary

    summary = run_summary(result, out, interrupted_by=interrupt.requested, reruns=reruns, resumed_from=resumed_from)
    if result.stopped_by is not None:
        print(f"combee learn: stopped early: {result.stopped_by}", file=sys.stderr)
    run_dir.write_summary(summary)
    print(msgspec.json.encode(summary).decode())
    if not quiet:
        from combee_fast.readout.closing import closing_lines

        elapsed = None if started is None else time.monotonic() - started
        print("\n".join(closing_lines(result, summary, out, val_split=val_split, elapsed=elapsed)), file=sys.stderr)
    if result.interrupted:
        print(f"combee learn: interrupted by {interrupt.requested} after step {result.steps}; "
              f"the artifact so far is in {Path(out) / 'final.json'}; resume with: {resume_command(out)}",
              file=sys.stderr)
        return EXIT_INTERRUPTED
    return EXIT_OK


def _unused(folder: str) -> str:
    """``folder``, or ``folder-2``, ``folder-3``, ... the first that does not exist yet: the default
    folder of a run is named to the second, and two runs started within one second get one each."""
    candidate, number = folder, 1
    while Path(candidate).exists():
        number += 1
        candidate = f"{folder}-{number}"
    return candidate


async def _eval(args: argparse.Namespace) -> int:
    """Score a deployable on a split; write the evaluation's folder (``eval.json`` with the score
    and its interval, and its dollars at the endpoints' prices; ``results.jsonl`` per example,
    ``report.md``, ``prompt.txt``, provenance)."""
    from combee_fast.learners import kind_of_file
    from combee_fast.readout.summary import shown_at
    from combee_fast.record.rundir import RunDir, check_run_target, read_split_manifests
    from combee_fast.session import open_session
    from combee_fast.tasks.base import verify_split

    kind, deployable = kind_of_file(args.artifact, learner=_learner_beside(args.artifact))
    config = flags.session_config(args, [(("task", "val_split"), args.split), (("task", "train_split"), args.split),
                                         (("learner",), kind.key)])  # the session opens the roles of the file's learner
    stamp = time.strftime("%Y%m%d-%H%M%S")
    out = args.out or _unused(str(Path(args.artifact).parent / f"eval-{_file_name(args.split)}-{stamp}"))
    check_run_target(out, overwrite=args.overwrite)
    async with open_session(config) as session:
        recorded = []
        manifests_file = Path(args.artifact).with_name("splits.json")
        if manifests_file.exists():
            recorded = read_split_manifests(manifests_file, what=f"the split hashes of {args.artifact}")
            for manifest in recorded:
                if (manifest.task, manifest.split) == (session.task.name, args.split):
                    verify_split(session.val_split, manifest)
        seen = _seen_rows(session, recorded)
        run_dir = RunDir(out, overwrite=args.overwrite)
        try:
            result, report = await _evaluated(session, config, run_dir, kind, deployable, args, seen)
        finally:
            run_dir.close()
        out = shown_at(out, run_dir)
        if args.card:
            from combee_fast.verify.discipline import record_report

            record_report(args.card, config, session.task, session.val_split, run=f"eval {args.artifact}")
    for split, shared in seen.items():
        print(f"combee eval: warning: {shared} rows of {args.split} were seen by the run that made "
              f"{args.artifact} (its split {split}, compared by content): not a held-out score", file=sys.stderr)
    print(msgspec.json.encode(report).decode())
    if result.unanswered > config.train.max_failed_fraction * result.examples:
        kinds = ", ".join(f"{kind} {n}" for kind, n in result.unanswered_by_kind.items())
        raise CallsFailed(f"{result.unanswered} of {result.examples} examples of {args.split} unanswered "
                          f"({kinds}); the accuracy covers only the {result.answered} answered; see {out}")
    from combee_fast.readout.closing import eval_lines

    print("\n".join(eval_lines(result, report, out)), file=sys.stderr)
    return EXIT_OK


def _learner_beside(path: str | Path) -> str | None:
    """The learner the run's ``config.json`` beside ``path`` names (a plugin's name or path), if any."""
    try:
        learner = msgspec.json.decode(Path(path).with_name("config.json").read_bytes()).get("learner")
    except (OSError, msgspec.DecodeError, AttributeError):
        return None
    return learner if isinstance(learner, str) else None


def _file_name(text: str) -> str:
    """``text`` (a split spec such as ``val[0:50]``) as part of a folder name."""
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in text).strip("_") or "split"


def _seen_rows(session: Any, recorded: Sequence[Any]) -> dict[str, int]:
    """Per split the artifact's run recorded (learned from, selected on): the rows it shares, by
    content, with the evaluated split (splits of another task or changed since are skipped)."""
    from combee_fast.errors import CombeeError
    from combee_fast.tasks.heldout import row_keys

    evaluated = row_keys(session.val_split)
    seen = {}
    for manifest in recorded:
        if manifest.task != session.task.name:
            continue
        try:
            split = session.task.load(manifest.split)
        except CombeeError:
            continue
        if split.manifest.sha256 == manifest.sha256 and (shared := len(evaluated & row_keys(split))):
            seen[manifest.split] = shared
    return seen


async def _evaluated(session: Any, config: Any, run_dir: Any, kind: Any, deployable: Any,
                     args: argparse.Namespace, seen: dict[str, int]) -> tuple[Any, dict[str, Any]]:
    """Evaluate ``deployable`` on the session's split into ``run_dir``: the result and the
    report printed (and kept as ``eval.json``)."""
    import asyncio

    from combee_fast.money.dollars import role_dollars, total
    from combee_fast.readout.compare import file_sha256
    from combee_fast.readout.report import answered_interval, eval_report
    from combee_fast.readout.scored import result_rows
    from combee_fast.record.ledger import CallCounts
    from combee_fast.record.provenance import provenance
    from combee_fast.run.events import CallFailed, CallReplied, on_kind
    from combee_fast.run.recorder import RunRecord

    split = session.val_split
    record = provenance(seed=config.seed, splits=[split.manifest])
    run_dir.write_config(config)
    run_dir.write_splits([split.manifest])
    run_dir.write_provenance(record)
    run_dir.write_prompt(deployable.render())
    run_dir.start()
    errors = session.events.subscribe(on_kind((CallFailed, CallReplied), RunRecord(run_dir)),
                                      critical=True)  # errors.jsonl, replies.jsonl
    try:
        async with _heartbeat(session, args, session.events, work="evaluation"):
            result = await session.evaluate(deployable, split.examples, learner=kind.key)
    finally:
        session.events.unsubscribe(errors)
    if 2 * result.answered > result.examples:  # replacing --overwrite's evaluation once most examples are answered
        run_dir.replace_previous()
    interval = await asyncio.to_thread(answered_interval, result)
    rows = result_rows(split.examples, result)
    report = {"split": args.split, "learner": kind.name, "examples": result.examples, "accuracy": result.accuracy,
              "interval": None if interval is None else msgspec.to_builtins(interval),
              "answered": result.answered, "unanswered": result.unanswered,
              "unanswered_by_kind": result.unanswered_by_kind, "seen_rows": seen, "playbook": args.artifact,
              "playbook_sha256": file_sha256(args.artifact), "run_dir": str(run_dir.location)}
    counts = CallCounts()
    for usage, error in result.outcomes:
        counts.add(usage, error)
    dollars = role_dollars(session.prices(), counts.prompt_tokens, counts.completion_tokens)
    report.update(dollars=total(dollars), dollars_by_role=dollars)
    run_dir.write_eval(report, rows)
    run_dir.write_provenance(record.ended_now())
    run_dir.write_report(eval_report(title=f"combee eval: {args.artifact} on {session.task.name} {args.split}",
                                     split=args.split, result=result, record=record.ended_now(), seen=seen,
                                     counts=counts, dollars=dollars, served=session.served()))
    return result, report


def _show(args: argparse.Namespace) -> int:
    """``combee show RUN``: the run's learned context (``prompt.txt``), or its page (``--report``)."""
    from combee_fast.learners import kind_of_file
    from combee_fast.record.rundir import read_run

    path = Path(args.run)
    if path.is_file():  # a final.json or best.json of any learner
        print(kind_of_file(path, learner=_learner_beside(path))[1].render())
        return EXIT_OK
    record = read_run(path)
    if args.report:
        report = path / "report.md"
        if not report.is_file():
            raise ConfigError(f"{path}: no report.md")
        print(report.read_text(encoding="utf-8"), end="")
        return EXIT_OK
    if record.prompt is None:
        raise ConfigError(f"{path}: no prompt.txt (a run made before it was written: combee show {path}/best.json)")
    print(record.prompt, end="")
    return EXIT_OK


def _compare(args: argparse.Namespace) -> int:
    """``combee compare RUN...``: a Markdown table of the runs, then the same configuration over its seeds;
    ``--paired A B``: the two on the rows both scored."""
    from combee_fast.readout.compare import compare_lines
    from combee_fast.readout.scored import paired_lines

    if args.paired and len(args.runs) != 2:
        raise ConfigError(f"compare --paired takes two runs, got {len(args.runs)}")
    print("\n".join(paired_lines(*args.runs) if args.paired else compare_lines(args.runs)))
    return EXIT_OK


async def _demo(args: argparse.Namespace) -> int:
    from combee_fast.demo import run_demo

    await run_demo(train_limit=args.train_limit, out=args.out)
    return EXIT_OK


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser(sys.argv[1:] if argv is None else argv)
    args = _parse(parser, argv)
    handlers = {"learn": _learn, "eval": _eval, "demo": _demo}
    plain = {"show": _show, "compare": _compare}
    if args.command not in handlers and args.command not in plain:
        return args.handler(args)
    try:
        if args.command in plain:
            return plain[args.command](args)
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
