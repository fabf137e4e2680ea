"""Combee's parallel reflection for the PyPI ``gepa`` package's own loop (GEPA interop).

``gepa`` 0.1.4 lets a caller own reflection: ``gepa.optimize(..., reflection_strategy=S)`` takes
any object with ``reflect(candidate, reflective_dataset, components_to_update) -> (proposal,
next)`` (its ``ReflectionLM`` protocol, duck-typed; ``proposal`` needs ``new_texts``,
``prompts``, ``raw_lm_outputs`` and ``metadata``) and, optionally, ``reflect_many(jobs)``.
:class:`CombeeReflectionStrategy` is such an object, so GEPA keeps its loop (Pareto selection,
minibatches, acceptance, budget) and its reflection becomes Combee's map and reduce:

- **map**: the component's reflective records are cut into augmented-shuffle groups
  (:func:`combee_fast.combee.shuffle.augmented_groups`, seed path ``("gepa-interop", call,
  component)``), one reflection call per group, **all in flight at once** (one thread each: GEPA's
  loop and its LM callables are blocking);
- **reduce**: the rewrites are merged by aggregation calls of at most ``max_fan_in`` rewrites each,
  every level's calls at once, until one text is left. An aggregation keeps added lines by
  reference (:mod:`combee_fast.gepa.revisions`), so its reply stays short; a reply that cannot be
  read keeps the first rewrite of its group.

The prompts are ours (``gepa/prompts/``: the proposer's and aggregator's instructions, sent as one
user message since GEPA's ``reflection_lm`` takes a string). A rewrite reply is read as our JSON
(``instruction``), else as the text of its fenced block, else as its whole text. Nothing here
imports ``gepa``: the package is needed only by the caller.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import orjson

from combee_fast.combee.shuffle import augmented_groups
from combee_fast.config import CombeeConfig
from combee_fast.engine.rng import rng_at
from combee_fast.gepa.calls import AGGREGATOR_SYSTEM_PROMPT, AGGREGATOR_USER_TEMPLATE, PROPOSER_SYSTEM_PROMPT
from combee_fast.gepa.revisions import changes_text, compose
from combee_fast.roles.base import decode_json_object, fill, load_prompt

INTEROP_PROPOSER_USER_TEMPLATE = load_prompt("interop_proposer_user.txt", beside=__file__)
_FENCED = re.compile(r"```[^\n]*\n(.*?)```", re.DOTALL)

LanguageModel = Callable[[str], str]
"""GEPA's reflection LM shape: a prompt in, the reply's text out (blocking)."""


@dataclass
class InteropProposal:
    """What GEPA reads from a reflection: new texts per component, the prompts and raw replies of
    the last aggregation (or the single rewrite), and Combee's per-call diagnostics."""

    new_texts: dict[str, str]
    prompts: dict[str, str] = field(default_factory=dict)
    raw_lm_outputs: dict[str, str] = field(default_factory=dict)
    metadata: dict[str, Any] = field(default_factory=dict)


def rewrite_text(reply: str) -> str | None:
    """The instruction in a reflection reply: our JSON's ``instruction``, else a fenced block's
    text, else the stripped reply (None when empty)."""
    obj = decode_json_object(None, reply)
    if isinstance(obj, dict) and isinstance(obj.get("instruction"), str):
        text = obj["instruction"].strip("\n")
        return text or None
    fenced = _FENCED.search(reply)
    text = (fenced.group(1) if fenced is not None else reply).strip("\n").strip()
    return text or None


class CombeeReflectionStrategy:
    """A GEPA ``ReflectionLM`` running Combee's concurrent map/reduce (module docstring) over the
    blocking callable ``lm``. Stateless: ``reflect`` returns the strategy itself as the next one.
    ``combee`` gives the shuffle's copies, the largest group and the aggregation fan-in; ``seed``
    roots the shuffle draws. Counters: ``calls`` (LLM calls), ``peak_in_flight``."""

    def __init__(self, lm: LanguageModel, *, combee: CombeeConfig | None = None, seed: int = 0) -> None:
        self.lm = lm
        self.combee = combee or CombeeConfig()
        self.seed = seed
        self.calls = 0
        self.peak_in_flight = 0
        self._reflections = 0
        self._in_flight = 0
        self._lock = threading.Lock()

    def reflect(
        self, candidate: dict[str, str], reflective_dataset: Mapping[str, Sequence[Mapping[str, Any]]],
        components_to_update: list[str],
    ) -> tuple[InteropProposal, CombeeReflectionStrategy]:
        with self._lock:
            number = self._reflections
            self._reflections += 1
        proposal = InteropProposal(new_texts={})
        for name in components_to_update:
            records = list(reflective_dataset.get(name) or ())
            if not records:
                continue
            text, prompt, raw, meta = self._component(candidate[name], records, (number, name))
            if text is not None and text != candidate[name]:
                proposal.new_texts[name] = text
                proposal.prompts[name] = prompt
                proposal.raw_lm_outputs[name] = raw
            proposal.metadata.update({f"combee:{name}:{key}": value for key, value in meta.items()})
        return proposal, self

    def reflect_many(
        self, jobs: Sequence[tuple[dict[str, str], Any, list[str]]],
    ) -> list[tuple[InteropProposal, CombeeReflectionStrategy]]:
        """One :meth:`reflect` per job, the jobs' map phases at once."""
        if not jobs:
            return []
        with ThreadPoolExecutor(max_workers=len(jobs)) as pool:
            return list(pool.map(lambda job: self.reflect(*job), jobs))

    # -- one component ---------------------------------------------------------------------------

    def _component(
        self, current: str, records: list[Mapping[str, Any]], path: tuple[int, str]
    ) -> tuple[str | None, str, str, dict[str, Any]]:
        groups = augmented_groups(
            len(records), self.combee.duplicates, rng_at(self.seed, "gepa-interop", *path),
            max_group=self.combee.max_group,
        )
        prompts = [self._proposer_prompt(current, [records[i] for i in members]) for members in groups]
        replies = self._all_at_once(prompts)
        rewrites = [text for text in map(rewrite_text, replies) if text is not None and text != current]
        meta: dict[str, Any] = {"map_calls": len(prompts), "groups": [list(g) for g in groups], "reduce_calls": 0}
        if not rewrites:
            return None, prompts[0], replies[0], meta
        prompt, raw = prompts[0], replies[0]
        while len(rewrites) > 1:
            chunks = [rewrites[i: i + self.combee.max_fan_in] for i in range(0, len(rewrites), self.combee.max_fan_in)]
            merge_prompts = [self._aggregator_prompt(current, chunk) for chunk in chunks]
            merge_replies = self._all_at_once(merge_prompts)
            meta["reduce_calls"] += len(merge_prompts)
            rewrites = [_merged(current, chunk, reply) for chunk, reply in zip(chunks, merge_replies)]
            prompt, raw = merge_prompts[-1], merge_replies[-1]
        return rewrites[0], prompt, raw, meta

    def _proposer_prompt(self, current: str, records: Sequence[Mapping[str, Any]]) -> str:
        examples = "\n".join(orjson.dumps(dict(r), default=str).decode() for r in records)
        user = fill(INTEROP_PROPOSER_USER_TEMPLATE, instruction=current, examples=examples)
        return PROPOSER_SYSTEM_PROMPT + "\n\n" + user

    def _aggregator_prompt(self, current: str, texts: Sequence[str]) -> str:
        return AGGREGATOR_SYSTEM_PROMPT + "\n\n" + fill(
            AGGREGATOR_USER_TEMPLATE, instruction=current, proposals=changes_text(current, texts)
        )

    def _all_at_once(self, prompts: Sequence[str]) -> list[str]:
        """Every prompt sent at once, one thread each; the replies in order."""
        with ThreadPoolExecutor(max_workers=max(1, len(prompts))) as pool:
            return list(pool.map(self._call, prompts))

    def _call(self, prompt: str) -> str:
        with self._lock:
            self._in_flight += 1
            self.peak_in_flight = max(self.peak_in_flight, self._in_flight)
        try:
            return self.lm(prompt)
        finally:
            with self._lock:
                self._in_flight -= 1
                self.calls += 1


def _merged(current: str, texts: Sequence[str], reply: str) -> str:
    """The aggregation's composed text, or the first rewrite when its reply cannot be read."""
    obj = decode_json_object(None, reply)
    if not isinstance(obj, dict):
        return texts[0]
    try:
        remove = [int(i) for i in obj.get("remove", [])]
        keep = [str(ref) for ref in obj.get("keep", [])]
        add = [str(line) for line in obj.get("add", [])]
    except (TypeError, ValueError):
        return texts[0]
    return compose(current, texts, remove, keep, add)
