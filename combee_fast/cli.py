"""``combee``: learn, evaluate, demo, and the simulated endpoint.

Bad flags and unreachable endpoints print one line naming the problem and exit with code 2.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn

import msgspec

from combee_fast.endpoint import sim_cli
from combee_fast.endpoint.sim import FaultConfig
from combee_fast.errors import CombeeError
from combee_fast.learn.train import LedgerRow
from combee_fast.session import METHODS, ROLES, EndpointSpec, SessionConfig, SimSpec

EXIT_USAGE = 2


class _Parser(argparse.ArgumentParser):
    """Reports a bad flag in one line (no usage dump) and exits 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text!r}")
    return value


def _batch_size(text: str) -> int | None:
    """A positive integer, or None for 'auto' (the controller)."""
    if text == "auto":
        return None
    try:
        return _positive_int(text)
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(f"must be a positive integer or 'auto', got {text!r}") from None


def _add_endpoint_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("endpoints (default: the in-process simulated endpoint)")
    group.add_argument("--endpoint", help="OpenAI-compatible base URL for every role, e.g. http://127.0.0.1:8000/v1")
    group.add_argument("--model", help="model name for every role")
    group.add_argument("--api-key-env", help="environment variable holding the API key")
    group.add_argument("--no-json-schema", action="store_true",
                       help="do not send response_format json_schema (for servers that reject it)")
    for role in ROLES:
        group.add_argument(f"--{role}-endpoint", help=f"base URL for the {role} role")
        group.add_argument(f"--{role}-model", help=f"model for the {role} role")
    group.add_argument("--concurrency", type=_positive_int, default=256, help="requests in flight per endpoint")
    group.add_argument("--timeout", type=float, default=600.0, help="seconds per request attempt")
    group.add_argument("--cache", help="record/replay cache file")
    group.add_argument("--cache-mode", choices=("off", "record", "replay", "record-missing"), default="off")
    sim = parser.add_argument_group("simulated endpoint")
    sim.add_argument("--sim-preset", default="h200-70b", help="flat, h200-70b or hosted-api")
    sim.add_argument("--time-scale", type=float, default=0.01, help="real seconds per simulated second")
    sim.add_argument("--latency-jitter", type=float, default=0.0, help="random +- fraction per request")
    for kind in ("429", "500", "drop", "malformed", "truncated"):
        sim.add_argument(f"--fault-{kind}", type=float, default=0.0, help=f"rate of injected {kind} faults")


def _task_option(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"must be KEY=VALUE, got {text!r}")
    return key, value


def _add_task_options(parser: argparse.ArgumentParser, *, split_flag: str) -> None:
    parser.add_argument("--task", default="formula", help="formula, finer, jsonl or traces")
    parser.add_argument("--data", help="the data file of a jsonl or traces task (its split is 'all')")
    parser.add_argument("--task-option", type=_task_option, action="append", default=[], metavar="KEY=VALUE",
                        help="a task option, e.g. input_field=question or scorer=numeric (repeatable)")
    parser.add_argument(split_flag, default="val", help="split name, optionally sliced: val[0:100]")
    parser.add_argument("--seed", type=int, default=0)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="combee", description="Parallel prompt learning (Combee) on a streaming engine.")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    learn = commands.add_parser("learn", help="learn a playbook from a task's train split")
    _add_task_options(learn, split_flag="--val-split")
    learn.add_argument("--train-split", default="train")
    learn.add_argument("--method", choices=METHODS, default="combee")
    learn.add_argument("--batch-size", type=_batch_size, default=40, help="an integer or 'auto'")
    learn.add_argument("--duplicates", "-p", type=_positive_int, default=2, help="augmented-shuffle copies p")
    learn.add_argument("--max-fan-in", type=_positive_int, default=8, help="most proposals per reducer call")
    learn.add_argument("--max-reduce-ops", type=_positive_int, default=32,
                       help="most proposed ops one reducer reads; more are split by topic across reducers")
    learn.add_argument("--max-group", type=_positive_int,
                       help="most reflection records one curator reads (default: the paper's sqrt(n) groups);"
                            " 16 keeps large batches accurate")
    learn.add_argument("--max-rounds", type=int, default=3, help="ACE regenerations after a wrong answer")
    learn.add_argument("--epochs", type=_positive_int, default=1)
    learn.add_argument("--eval-every", type=int, default=0, help="validate every N steps (0: at the end)")
    learn.add_argument("--token-budget", type=_positive_int, help="playbook token budget")
    learn.add_argument("--no-ground-truth", action="store_true", help="reflect without the target answer")
    learn.add_argument("--out", help="run directory (default: runs/<task>-<method>-<date-time>)")
    learn.add_argument("--overwrite", action="store_true", help="replace the run already in --out")
    learn.add_argument("--quiet", action="store_true", help="no progress lines")
    _add_endpoint_options(learn)

    evaluate = commands.add_parser("eval", help="score a saved playbook on a split")
    _add_task_options(evaluate, split_flag="--split")
    evaluate.add_argument("--playbook", required=True, help="a playbook JSON file (e.g. runs/x/best.json)")
    _add_endpoint_options(evaluate)

    demo = commands.add_parser("demo", help="sequential vs naive vs combee on Formula, simulated endpoint")
    demo.add_argument("--train-limit", type=_positive_int, default=500, help="train examples to learn from")

    sim_cli.register(commands)
    return parser


def _session_config(args: argparse.Namespace, **overrides: object) -> SessionConfig:
    endpoints: dict[str, EndpointSpec] = {}
    json_schema = not args.no_json_schema
    if args.endpoint or args.model:
        endpoints["default"] = EndpointSpec(args.endpoint, args.model, args.api_key_env, json_schema)
    for role in ROLES:
        url, model = getattr(args, f"{role}_endpoint"), getattr(args, f"{role}_model")
        if url or model:
            fallback = endpoints.get("default", EndpointSpec())
            endpoints[role] = EndpointSpec(url or fallback.url, model or fallback.model, args.api_key_env, json_schema)
    faults = FaultConfig(
        rate_429=args.fault_429, rate_500=args.fault_500, rate_drop=args.fault_drop,
        rate_malformed=args.fault_malformed, rate_truncated=args.fault_truncated, retry_after_s=0.5,
    )
    sim = SimSpec(args.sim_preset, args.time_scale, args.latency_jitter, faults)
    task_options = dict(args.task_option)
    if args.data:
        task_options["path"] = args.data
    return SessionConfig(
        task=args.task, task_options=task_options, seed=args.seed, concurrency=args.concurrency, timeout_s=args.timeout,
        endpoints=endpoints, sim=sim, cache_path=args.cache, cache_mode=args.cache_mode, **overrides,
    )


def _progress(row: LedgerRow) -> None:
    val = "" if row.val_accuracy is None else f"  val {100 * row.val_accuracy:.1f}%"
    first_try = f"  first-try {100 * row.first_try_accuracy:.0f}%" if row.batch_size else ""
    errors = f"  errors {len(row.errors)}" if row.errors else ""
    print(
        f"[{row.method}] epoch {row.epoch + 1} step {row.step + 1}  batch {row.batch_size} ({row.batch_reason})"
        f"  sim {row.cumulative_sim_seconds:,.0f} s  bullets {row.bullets}{first_try}{errors}{val}",
        file=sys.stderr,
        flush=True,
    )


async def _learn(args: argparse.Namespace) -> int:
    from combee_fast.learn.rundir import RunDir
    from combee_fast.session import open_session

    config = _session_config(
        args, train_split=args.train_split, val_split=args.val_split, method=args.method,
        batch_size=args.batch_size, duplicates=args.duplicates, max_fan_in=args.max_fan_in,
        max_reduce_ops=args.max_reduce_ops, max_group=args.max_group,
        max_rounds=args.max_rounds, epochs=args.epochs, eval_every=args.eval_every,
        token_budget=args.token_budget, use_ground_truth=not args.no_ground_truth,
    )
    out = args.out or f"runs/{args.task}-{args.method}-{time.strftime('%Y%m%d-%H%M%S')}"
    run_dir = RunDir(out, overwrite=args.overwrite)
    try:
        async with open_session(config) as session:
            plan = None
            if config.batch_size is None:
                from combee_fast.learn.autobatch import ControllerPlan

                plan = await ControllerPlan.for_session(session, run_dir)
            result = await session.train(plan=plan, run_dir=run_dir, on_step=None if args.quiet else _progress)
    finally:
        run_dir.close()
    summary = {
        "method": result.method, "samples": result.samples, "calls": result.calls, "tokens": result.tokens,
        "train_sim_seconds": round(result.train_sim_seconds, 3),
        "train_wall_seconds": round(result.train_wall_seconds, 3),
        "final_val_accuracy": None if result.final_eval is None else result.final_eval.accuracy,
        "best_val_accuracy": result.best_val_accuracy, "bullets": len(result.final),
        "run_dir": out,
    }
    run_dir.write_json("summary.json", summary)
    print(msgspec.json.encode(summary).decode())
    return 0


async def _eval(args: argparse.Namespace) -> int:
    from combee_fast.learn.evaluate import evaluate
    from combee_fast.playbook import Playbook
    from combee_fast.session import open_session
    from combee_fast.tasks.base import SplitManifest, verify_split

    playbook = Playbook.load(args.playbook)
    config = _session_config(args, val_split=args.split, train_split=args.split)
    async with open_session(config) as session:
        manifests_file = Path(args.playbook).with_name("splits.json")
        if manifests_file.exists():
            recorded = msgspec.json.decode(manifests_file.read_bytes(), type=list[SplitManifest])
            for manifest in recorded:
                if (manifest.task, manifest.split) == (session.task.name, args.split):
                    verify_split(session.val_split, manifest)
        result = await evaluate(session.agents, playbook, session.val_split.examples, concurrency=config.concurrency)
    print(msgspec.json.encode({
        "split": args.split, "examples": result.examples, "accuracy": result.accuracy, "errors": result.errors,
    }).decode())
    return 0


async def _demo(args: argparse.Namespace) -> int:
    from combee_fast.demo import run_demo

    await run_demo(train_limit=args.train_limit)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    handlers = {"learn": _learn, "eval": _eval, "demo": _demo}
    if args.command not in handlers:
        return args.handler(args)
    try:
        from combee_fast.engine.loop import run

        return run(handlers[args.command](args))
    except CombeeError as exc:
        print(f"combee {args.command}: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print(f"combee {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
