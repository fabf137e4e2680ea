"""The run loop around the learning methods, generic over the learner (it imports none): it
plans a batch, runs the method's step, records it, asks the stop rules and checkpoints. What it
writes is :mod:`combee_fast.record`'s, what a person reads of it :mod:`combee_fast.readout`'s,
what it costs :mod:`combee_fast.money`'s.

- :mod:`.train`: the one training loop (start, plan, step, record, finish) and its result.
- :mod:`.stops`: the stop rules (epochs, interrupt, no improvement, score threshold, wall clock,
  failing calls, unanswered validation), each declaring what its end means and what the run spends.
- :mod:`.interrupt`: SIGINT/SIGTERM as a stop request at a safe point.
- :mod:`.batch_plans`: fixed batch size, the live planner, the paper's controller, or an earlier run's decisions.
- :mod:`.step_signals`: what a finished step measured, for the live planner.
- :mod:`.events`: the typed event stream of a training run and its hub (what consumers subscribe to).
- :mod:`.recorder`: the run directory's record of the events (ledger, errors, trajectories), a critical consumer.
- :mod:`.context` and :mod:`.state`: the import paths plug-ins written before the split use for
  :class:`~combee_fast.protocols.learning.LearnContext` and :class:`~combee_fast.record.state.TrainState`.
"""
