"""Where does the host's event-loop thread spend its time while the online learner works?

Runs the workload of ``bench/loop_lag.py`` (``--rollouts`` rollouts submitted to an online
learner, batch 64, the simulated endpoint in a separate process) once, with ``cProfile`` on the
host thread and a ``gc.callbacks`` timer from the learner's start until every ticket is settled
(the learner's stop, which only waits, is not counted), and splits the host thread's time (wall
time, as cProfile measures it: waits for the GIL or a core included) into categories by
the module of each function (a C function's own time goes to its callers' categories, pro rata):

    decode      response bytes -> structs (msgspec decoders called by the client, bytes.decode)
    encode      request structs -> bytes (the client's ``_encode`` and msgspec encoders)
    http        aiohttp / yarl / multidict, ``endpoint/http1.py``: requests, connection pool, reading
    parse       replies -> records: ``endpoint/structured.py``, the roles' ``parse_*`` functions
    prompts     prompt building: the roles' ``*_messages``/``*_text`` functions, prompt templates
    client      the rest of ``endpoint/client.py`` (retry loop, slots, accounting) and cache
    learner     the Combee step, shuffle, reduce, map, ACE learner, online learner, schema records
    scheduling  asyncio / uvloop / concurrent.futures / threading internals (tasks, futures, queues)
    bench       the ticker itself
    other       anything else

``gc`` is the wall time of collections seen by ``gc.callbacks`` on any thread; it is *included*
in the categories above (cProfile charges a collection to whatever function allocated).
``off_thread_cpu`` is the process's CPU time minus the host thread's: the learner's
``to_thread`` work (render, apply, topic split) that still competes for the GIL.

    python bench/loop_profile.py --rollouts 2000 [--mode inloop|threaded|process]

``--mode threaded`` profiles the host thread with the learner behind :class:`ThreadedLearner`,
``--mode process`` with it behind :class:`ProcessLearner`; ``inloop`` (the default) is the plain
:class:`OnlineLearner` on the host's loop.
The last line is ``host_cpu_ms=<> wall_ms=<> gc_ms=<> gc_max_ms=<> <category>_ms=<> ...``.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import gc
import pstats
import subprocess
import sys
import threading
import time
from typing import Any

import msgspec

from loop_lag import GcPauses  # noqa: E402 -- bench/ is on sys.path when run as a script
from combee_fast.ace.calls import AceCalls
from combee_fast.config import EndpointSpec, OnlineConfig, SessionConfig
from combee_fast.engine.loop import run
from combee_fast.ace.playbook import Playbook
from combee_fast.embedded.online import OnlineLearner
from combee_fast.session import open_session

CATEGORIES = ("decode", "encode", "http", "parse", "prompts", "client", "learner", "scheduling", "bench", "other")


def _category(func: tuple[str, int, str]) -> str | None:
    """The category of a Python function; ``None`` for C functions (charged to their callers)."""
    path, _, name = func
    if path == "~" or path.startswith("<"):
        return None
    path = path.replace("\\", "/")
    if "/combee_fast/endpoint/structured.py" in path:
        return "parse"
    if "/combee_fast/endpoint/http1.py" in path:
        return "http"
    if "/combee_fast/endpoint/client.py" in path:
        if name == "_encode":
            return "encode"
        return "client"
    if "/combee_fast/endpoint/" in path:
        return "client"
    if "/combee_fast/roles/" in path:
        return "parse" if name.startswith(("parse", "_parse", "_op", "_ops")) else "prompts"
    if "/combee_fast/" in path:
        return "learner"
    if any(part in path for part in ("/aiohttp/", "/yarl/", "/multidict/", "/propcache/", "/aiohappyeyeballs/")):
        return "http"
    if any(part in path for part in ("/asyncio/", "/uvloop/", "/concurrent/", "threading.py", "queue.py",
                                     "contextlib.py", "selectors.py", "weakref.py")):
        return "scheduling"
    if "/bench/" in path:
        return "bench"
    return "other"


def _c_function_category(func: tuple[str, int, str], caller: tuple[str, int, str]) -> str | None:
    name = func[2]
    if "msgspec" in name and ("decode" in name or "Decoder" in name):
        caller_category = _category(caller)
        return "parse" if caller_category == "parse" else "decode"
    if "msgspec" in name and ("encode" in name or "Encoder" in name):
        return "encode" if _category(caller) in ("encode", "client") else _category(caller)
    if name in ("<method 'decode' of 'bytes' objects>",) and _category(caller) == "client":
        return "decode"
    return _category(caller)


def categorize(stats: pstats.Stats) -> dict[str, float]:
    """Own time (s) per category; C functions' time is split over their callers' categories."""
    totals = dict.fromkeys(CATEGORIES, 0.0)
    raw: dict[Any, Any] = stats.stats  # type: ignore[attr-defined]
    for func, (_, _, tottime, _, callers) in raw.items():
        category = _category(func)
        if category is not None:
            totals[category] += tottime
            continue
        if not callers:
            totals["scheduling"] += tottime  # called straight from the loop (uvloop's C callbacks)
            continue
        for caller, entry in callers.items():
            own = entry[2]  # tottime of func when called from caller
            totals[_c_function_category(func, caller) or "scheduling"] += own
    return totals


async def profile(url: str, rollouts: int, mode: str) -> tuple[pstats.Stats, float, float, float, GcPauses, int]:
    async with open_session(SessionConfig(endpoints={"default": EndpointSpec(url, "sim")})) as session:
        seeds = [await AceCalls(session.calls).generate(e, "", epoch=0) for e in session.train_split.examples[:100]]
        batch = [msgspec.structs.replace(seeds[i % 100], round=i // 100) for i in range(rollouts)]
        config = OnlineConfig(batch_size=64, max_wait_s=0.05)
        timer = GcPauses()
        done = asyncio.Event()
        ticks = 0

        async def ticker() -> None:
            nonlocal ticks
            while not done.is_set():
                await asyncio.sleep(0.001)
                ticks += 1

        if mode == "threaded":
            from combee_fast.embedded.threaded import ThreadedLearner

            learner: Any = ThreadedLearner(session.calls, Playbook.empty(), config)
        elif mode == "process":
            from combee_fast.embedded.process import ProcessLearner

            learner = ProcessLearner(session.calls, Playbook.empty(), config)
        else:
            learner = OnlineLearner(session.calls, Playbook.empty(), config)
        profiler = cProfile.Profile()
        async with learner:  # started (threads, child, Numba warm-up): measure from here
            gc.callbacks.append(timer)
            ticking = asyncio.create_task(ticker())
            wall0, cpu0, thread0 = time.perf_counter(), time.process_time(), time.thread_time()
            profiler.enable()
            try:
                tickets = await asyncio.gather(*(learner.submit(r) for r in batch))
                await asyncio.gather(*tickets)
            finally:
                profiler.disable()
                wall, cpu, thread = time.perf_counter() - wall0, time.process_time() - cpu0, time.thread_time() - thread0
                gc.callbacks.remove(timer)
        done.set()
        await ticking
    return pstats.Stats(profiler), wall, cpu, thread, timer, ticks


def main() -> None:
    parser = argparse.ArgumentParser(description="host-thread profile of online learning")
    parser.add_argument("--rollouts", type=int, default=2000)
    parser.add_argument("--mode", choices=("inloop", "threaded", "process"), default="inloop")
    parser.add_argument("--top", type=int, default=25, help="functions to list by own time")
    args = parser.parse_args()
    server = subprocess.Popen(
        [sys.executable, "-m", "combee_fast.cli", "sim-server", "--port", "0", "--world", "formula",
         "--preset", "flat", "--time-scale", "0.001"],
        stdout=subprocess.PIPE, text=True,
    )
    try:
        url = server.stdout.readline().split()[2]  # type: ignore[union-attr]
        stats, wall, cpu, thread_cpu, timer, ticks = run(profile(url, args.rollouts, args.mode))
    finally:
        server.terminate()
        server.wait(timeout=30)
    stats.sort_stats("tottime").print_stats(args.top)
    totals = categorize(stats)
    profiled = sum(totals.values())
    print(f"threads alive at the end: {threading.active_count()}; ticks {ticks}")
    print(f"wall {wall * 1e3:.0f} ms, process CPU {cpu * 1e3:.0f} ms, host-thread CPU {thread_cpu * 1e3:.0f} ms "
          f"(profiled host time {profiled * 1e3:.0f} ms, with cProfile overhead)")
    for name in CATEGORIES:
        print(f"{name:>12}: {totals[name] * 1e3:8.1f} ms  {100 * totals[name] / max(profiled, 1e-9):5.1f} %")
    pauses = sorted(timer.pauses)
    print(f"{'gc':>12}: {sum(pauses) * 1e3:8.1f} ms in {len(pauses)} collections, max {max(pauses, default=0) * 1e3:.2f} ms "
          f"(included above)")
    print(" ".join([f"host_cpu_ms={thread_cpu * 1e3:.0f}", f"wall_ms={wall * 1e3:.0f}",
                    f"off_thread_cpu_ms={(cpu - thread_cpu) * 1e3:.0f}", f"gc_ms={sum(pauses) * 1e3:.1f}",
                    f"gc_max_ms={max(pauses, default=0) * 1e3:.2f}",
                    *(f"{name}_ms={totals[name] * 1e3:.1f}" for name in CATEGORIES)]))


if __name__ == "__main__":
    main()
