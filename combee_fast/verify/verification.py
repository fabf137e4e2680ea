"""``verify``: a configuration and the card's serial baseline under every (seed, hardware class)
cell of the card, scored on the test split, judged by :mod:`combee_fast.verify.verdict`.

Cells on the simulated endpoint run concurrently (each its own session and simulated server);
cells of a hardware class with real endpoints run one after another, so they never load one
another's server. Serial-baseline cells come from the cache folder when they were run before
(:mod:`combee_fast.verify.baseline`).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeVar

import msgspec

from combee_fast.config import SessionConfig, VerifyConfig
from combee_fast.errors import ConfigError
from combee_fast.learners import resolve, roles_of
from combee_fast.native.bootstrap import DEFAULT_RESAMPLES
from combee_fast.redact import strip_userinfo
from combee_fast.verify.baseline import baseline_cell
from combee_fast.verify.card import Card, HardwareClass
from combee_fast.verify.cells import CellRun, cell_config, run_cell
from combee_fast.verify.verdict import Verdict, judge

T = TypeVar("T")


class Verification(msgspec.Struct, frozen=True, kw_only=True):
    """Everything one ``verify`` measured and decided."""

    card: Card
    config: SessionConfig  # the configuration verified (before it is made a cell)
    label: str
    runs: tuple[CellRun, ...]
    baselines: tuple[CellRun, ...]  # same order as runs
    cached_baselines: int
    verdict: Verdict


def _gate(hardware: HardwareClass, locks: dict[str, asyncio.Lock]) -> contextlib.AbstractAsyncContextManager[object]:
    """No gate for a simulated class (each cell has its own server); one at a time on real endpoints."""
    if hardware.sim_preset is not None:
        return contextlib.nullcontext()
    return locks.setdefault(hardware.name, asyncio.Lock())


def check_endpoints(card: Card, config: SessionConfig) -> None:
    """:class:`ConfigError` (one line) when ``config`` names endpoints that are none of the card's
    hardware classes: verify runs every cell on the card's classes, so endpoints given only in a
    configuration would be dropped."""
    urls = {role.key: config.endpoint_for(*role.lookup_keys).url for role in roles_of(config)}
    if all(url is None for url in urls.values()) or card.hardware_for(config) is not None:
        return
    named = ", ".join(f"{role}={strip_userinfo(url)}" for role, url in urls.items() if url is not None)
    raise ConfigError(f"the configuration names endpoints ({named}) that are no hardware class of card "
                      f"{card.name!r}; verify runs every cell on the card's classes: add them to the card as a "
                      "[[hardware]] class with endpoints = {default = {url = ..., model = ...}} (see docs/cards.md)")


async def verify_config(
    card: Card, card_path: str | Path, config: SessionConfig, *, settings: VerifyConfig = VerifyConfig(),
    label: str | None = None, resamples: int = DEFAULT_RESAMPLES, runs_dir: str | Path | None = None,
    on_cell: Callable[[str], None] | None = None,
) -> Verification:
    """Run ``config`` and the serial baseline in every cell of ``card`` and judge them.

    The serial baseline is the card's method on the configuration's learner (ACE's
    ``sequential``; for GEPA, serial GEPA with the configuration's search settings), or the
    learner the card's method names (``gepa``, ``textgrad``: :func:`~combee_fast.learners.serial_baseline`).
    ``runs_dir``: keep each cell's run directory under it (``<hardware>-seed<k>``). ``on_cell``
    is told one line per finished cell. :class:`ConfigError` for a configuration of another task.
    """
    choice = resolve(config.learner, config.method)
    if config.task.name != card.task.name:
        raise ConfigError(f"the configuration is for task {config.task.name!r}; the card is for {card.task.name!r}")
    check_endpoints(card, config)
    locks: dict[str, asyncio.Lock] = {}
    cells = [(hardware, seed) for hardware in card.hardware for seed in settings.seeds]
    name = label or f"{choice.shown}-b{choice.kind.batch_size(choice.method, config) or 'auto'}"
    started, finished = time.monotonic(), [0]

    def said(line: str) -> None:
        """One finished cell, counted (``k of n``) with the real time so far."""
        if on_cell is not None:
            finished[0] += 1
            on_cell(f"[verify] cell {finished[0]} of {2 * len(cells)} ({time.monotonic() - started:,.0f} s): {line}")

    async def gated(hardware: HardwareClass, work: Callable[[], Awaitable[T]]) -> T:
        async with _gate(hardware, locks):
            return await work()

    async def ours(hardware: HardwareClass, seed: int) -> CellRun:
        run_dir = None if runs_dir is None else Path(runs_dir) / f"{name}-{hardware.name}-seed{seed}"
        cell = await gated(hardware, lambda: run_cell(
            card, card_path, cell_config(card, config, hardware, seed), hardware, command="verify", run_dir=run_dir))
        said(f"{name} {hardware.name} seed {seed}: {cell.sim_seconds:,.0f} sim s, {cell.wall_seconds:,.1f} wall s, "
             f"test {100 * cell.test_accuracy:.1f}%")
        return cell

    async def theirs(hardware: HardwareClass, seed: int) -> tuple[CellRun, bool]:
        found = await gated(hardware, lambda: baseline_cell(
            card, card_path, hardware, seed, folder=settings.baseline_cache, time_scale=settings.serial_time_scale,
            world=config.sim.world, learner=choice.kind.key, learners=config.learners))
        cell, cached = found
        said(f"baseline {hardware.name} seed {seed}: {cell.sim_seconds:,.0f} sim s, {cell.wall_seconds:,.1f} wall s, "
             f"test {100 * cell.test_accuracy:.1f}%{' (cached)' if cached else ''}")
        return found

    runs: list[CellRun]
    baselines: list[tuple[CellRun, bool]]
    runs, baselines = await asyncio.gather(asyncio.gather(*(ours(h, s) for h, s in cells)),
                                           asyncio.gather(*(theirs(h, s) for h, s in cells)))
    verdict = await asyncio.to_thread(
        judge, [(run, base) for run, (base, _) in zip(runs, baselines)], card.claim, resamples=resamples)
    return Verification(
        card=card, config=config, label=name, runs=tuple(runs), baselines=tuple(base for base, _ in baselines),
        cached_baselines=sum(cached for _, cached in baselines), verdict=verdict,
    )
