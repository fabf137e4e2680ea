"""The GEPA loop: Pareto parent, minibatch, reflection, acceptance, validation, under a budget.

One iteration:

1. draw a parent from the Pareto pool (:meth:`~combee_fast.gepa.pareto.ParetoPool.sample_parent`,
   seed path ``("gepa", "parent", iteration)``) and pick its component round-robin;
2. take the next minibatch of train examples (each epoch in the order drawn at ``("order",
   epoch)``, the order every method of the engine uses), and grade the parent on it;
3. if it already scores 1 on every example (and ``skip_perfect``), stop here;
4. propose the component's new text (the method's :class:`~combee_fast.gepa.methods.Reflection`);
5. grade the child on the same minibatch; accept it only when its total is strictly higher;
6. grade an accepted child on the whole validation set and add it to the pool.

Every grading of a candidate on one example is one metric call. The search starts by grading the
seed candidate on the validation set, and starts no iteration once ``max_metric_calls`` are spent
(the last one may overshoot, as in GEPA), nor (with ``max_epochs``) one whose minibatch would
start pass ``max_epochs`` over the train split. Gradings of one set run in parallel
(``concurrency`` at once); a phase's time is its critical path in simulated seconds, and an
iteration's time is the sum of its phases. Deterministic given the seed and the endpoint's answers.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence

import msgspec

from combee_fast.config import GepaConfig
from combee_fast.engine.rng import rng_at
from combee_fast.engine.stream import indexed_map
from combee_fast.engine.timing import finish_times
from combee_fast.gepa.calls import Evaluation, GepaCalls
from combee_fast.gepa.candidate import Candidate
from combee_fast.gepa.learner import GepaLearner
from combee_fast.gepa.methods import Reflection
from combee_fast.gepa.pareto import ParetoPool
from combee_fast.schema import Example, Proposal, Usage


class Graded(msgspec.Struct, frozen=True):
    """One candidate graded on a set of examples: every evaluation and the critical path."""

    evaluations: tuple[Evaluation, ...]
    sim_seconds: float

    @property
    def total(self) -> float:
        return sum(e.score for e in self.evaluations)

    @property
    def scores(self) -> tuple[float, ...]:
        return tuple(e.score for e in self.evaluations)


class Iteration(msgspec.Struct, frozen=True):
    """What one iteration did. ``outcome``: accepted, rejected, perfect (no reflection needed) or
    no-proposal (the reflection changed nothing). ``metric_calls`` is the run's total after it."""

    iteration: int
    epoch: int
    parent: int
    component: str
    minibatch: int
    parent_total: float
    child_total: float | None
    outcome: str
    child: int | None
    metric_calls: int
    sim_seconds: float
    wall_seconds: float
    best: int
    best_val_accuracy: float
    usages: tuple[Usage, ...]
    proposals: tuple[Proposal, ...]
    errors: tuple[tuple[str, str, str], ...]  # (example id or call, error kind, message) of failed calls


class SearchResult(msgspec.Struct, frozen=True):
    """The pool's candidates and validation scores, the best one, the metric calls spent, time."""

    candidates: tuple[Candidate, ...]
    val_scores: tuple[tuple[float, ...], ...]
    best: int
    metric_calls: int
    seed_sim_seconds: float
    seed_usages: tuple[Usage, ...]
    iterations: tuple[Iteration, ...]

    @property
    def usages(self) -> tuple[Usage, ...]:
        """Every call of the search: the seed's validation, then each iteration's calls."""
        return self.seed_usages + tuple(u for i in self.iterations for u in i.usages)

    @property
    def sim_seconds(self) -> float:
        return self.seed_sim_seconds + sum(i.sim_seconds for i in self.iterations)

    @property
    def best_val_accuracy(self) -> float:
        scores = self.val_scores[self.best]
        return sum(scores) / len(scores)


def minibatches(items: Sequence[Example], size: int, seed: int) -> Iterator[tuple[int, list[Example]]]:
    """Endless ``(epoch, minibatch)`` pairs: each epoch's items in the order drawn at
    ``("order", epoch)``, cut into consecutive minibatches of ``size`` (one may span two epochs;
    it carries the epoch it started in)."""
    if not items:
        raise ValueError("GEPA needs at least one train example")
    epoch, position = 0, 0
    order = rng_at(seed, "order", 0).permutation(len(items))
    while True:
        start_epoch, batch = epoch, []
        while len(batch) < size:
            if position == len(order):
                epoch, position = epoch + 1, 0
                order = rng_at(seed, "order", epoch).permutation(len(items))
            batch.append(items[order[position]])
            position += 1
        yield start_epoch, batch


async def grade(calls: GepaCalls, candidate: Candidate, examples: Sequence[Example], *, concurrency: int) -> Graded:
    """``candidate`` graded on every example, ``concurrency`` solves at once, in example order."""
    text = candidate.render()

    async def one(_: int, example: Example) -> Evaluation:
        return await calls.solve(example, text)

    evaluations = await indexed_map(examples, one, concurrency=concurrency)
    finished = finish_times([e.usage.effective_latency_s for e in evaluations], concurrency)
    return Graded(tuple(evaluations), max(finished, default=0.0))


class GepaSearch:
    """GEPA over ``calls`` with one reflection strategy and minibatch size."""

    def __init__(
        self, calls: GepaCalls, reflection: Reflection, *, minibatch: int, config: GepaConfig, seed: int,
        concurrency: int,
    ) -> None:
        self.calls = calls
        self.reflection = reflection
        self.minibatch = minibatch
        self.config = config
        self.seed = seed
        self.concurrency = concurrency
        self.metric_calls = 0

    def _spent(self, next_epoch: int) -> bool:
        epochs = self.config.max_epochs
        return self.metric_calls >= self.config.max_metric_calls or (epochs is not None and next_epoch >= epochs)

    async def grade(self, candidate: Candidate, examples: Sequence[Example]) -> Graded:
        """``candidate`` on every example, in parallel: ``len(examples)`` metric calls."""
        graded = await grade(self.calls, candidate, examples, concurrency=self.concurrency)
        self.metric_calls += len(graded.evaluations)
        return graded

    async def run(
        self, train: Sequence[Example], val: Sequence[Example], seed_candidate: Candidate, *,
        on_iteration: Callable[[Iteration], None] | None = None,
    ) -> SearchResult:
        """Search from ``seed_candidate`` until the budget is spent."""
        if not val:
            raise ValueError("GEPA needs at least one validation example")
        self.metric_calls = 0
        pool: ParetoPool[Candidate] = ParetoPool(len(val))
        seeded = await self.grade(seed_candidate, val)
        pool.add(seed_candidate, seeded.scores)
        batches = minibatches(train, self.minibatch, self.seed)
        iterations: list[Iteration] = []
        while not self._spent((len(iterations) * self.minibatch) // len(train)):
            record = await self._iterate(len(iterations), pool, batches, val)
            iterations.append(record)
            if on_iteration is not None:
                on_iteration(record)
        return SearchResult(
            tuple(pool.candidates), tuple(pool.scores), pool.best(), self.metric_calls, seeded.sim_seconds,
            tuple(e.usage for e in seeded.evaluations), tuple(iterations),
        )

    async def _iterate(
        self, iteration: int, pool: ParetoPool[Candidate], batches: Iterator[tuple[int, list[Example]]],
        val: Sequence[Example],
    ) -> Iteration:
        started = time.perf_counter()
        parent_index = pool.sample_parent(rng_at(self.seed, "gepa", "parent", iteration))
        parent = pool.candidates[parent_index]
        names = parent.names()
        component = names[iteration % len(names)]
        epoch, batch = next(batches)
        graded = [await self.grade(parent, batch)]
        proposals: tuple[Proposal, ...] = ()
        child_total: float | None = None
        child_index: int | None = None
        outcome = "perfect"
        reflect_seconds = 0.0
        if not (self.config.skip_perfect and all(e.score >= 1.0 for e in graded[0].evaluations)):
            learner = GepaLearner(self.calls, component)
            reflected = await self.reflection.reflect(
                learner, parent.components[component], list(graded[0].evaluations), iteration=iteration
            )
            proposals, reflect_seconds = reflected.calls, reflected.sim_seconds
            outcome = "no-proposal"
            if reflected.text is not None:
                child = parent.replaced(component, reflected.text, parent=parent_index)
                graded.append(await self.grade(child, batch))
                child_total = graded[-1].total
                outcome = "rejected"
                if child_total > graded[0].total:
                    graded.append(await self.grade(child, val))
                    child_index = pool.add(child, graded[-1].scores)
                    outcome = "accepted"
        evaluations = [e for g in graded for e in g.evaluations]
        return Iteration(
            iteration=iteration, epoch=epoch, parent=parent_index, component=component, minibatch=len(batch),
            parent_total=graded[0].total, child_total=child_total, outcome=outcome, child=child_index,
            metric_calls=self.metric_calls, sim_seconds=sum(g.sim_seconds for g in graded) + reflect_seconds,
            wall_seconds=time.perf_counter() - started, best=pool.best(), best_val_accuracy=pool.mean(pool.best()),
            usages=tuple(e.usage for e in evaluations) + tuple(p.usage for p in proposals),
            proposals=proposals,
            errors=tuple((e.example.id, e.error.kind, e.error.message) for e in evaluations if e.error is not None)
            + tuple((p.source, p.error.kind, p.error.message) for p in proposals if p.error is not None),
        )
