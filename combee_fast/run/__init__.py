"""The run machinery around the learning methods, generic over the learner (it imports none).

- :mod:`.train`: the one training loop (start, plan, step, record, finish) and its result.
- :mod:`.state`: :class:`~.state.TrainState`, what the loop works on and a checkpoint keeps; the epoch order.
- :mod:`.stops`: the stop rules (epochs, interrupt, no improvement, score threshold, wall clock,
  failing calls, unanswered validation), each declaring what its end means and what the run spends.
- :mod:`.interrupt`: SIGINT/SIGTERM as a stop request at a safe point.
- :mod:`.checkpoint`: the state written after every step (typed, checksummed), and read back to resume.
- :mod:`.rundir`: the run directory, the only writer and reader of run files, and its lock.
- :mod:`.swap`: the journaled replacement of a previous run, recoverable after a kill.
- :mod:`.bounds`: the ranges a stored run's counts, seconds and scores must fall in when decoded.
- :mod:`.batch_plans`: fixed batch size, the live planner, the paper's controller, or an earlier run's decisions.
- :mod:`.step_signals`: what a finished step measured, for the live planner.
- :mod:`.ledger`: one row per step (time, calls, tokens per role, errors, accuracy, predicted seconds).
- :mod:`.predictions`: the start-up probe's batching curve and the planner's predicted against
  measured step seconds, for ``summary.json`` and ``report.md``.
- :mod:`.context`: what a learner builds its methods and evaluation from.
- :mod:`.cost`: GPU-seconds of each step.
- :mod:`.dollars`: each endpoint's price, and the dollars of each step, role and accepted improvement.
- :mod:`.concurrency`: calls in flight per role, requested and achieved, and a role held below its cap.
- :mod:`.improvements`: candidates explored and accepted, tokens per accepted improvement.
- :mod:`.usage`: the per-split usage record of an experiment card, in the state directory.
- :mod:`.events`: the typed event stream of a run and its hub (what consumers subscribe to).
- :mod:`.record`: the run directory's record of the events (ledger, errors, trajectories), a critical consumer.
- :mod:`.notices`: what a run says on stderr as it happens (waits, overloads, re-run episodes), consumers.
- :mod:`.event_log`: a consumer writing every event to a JSONL file (bounded writes, rotated).
- :mod:`.metrics`: a consumer serving an online learner's figures as a Prometheus endpoint.
- :mod:`.progress`: the progress bar (or plain lines), a consumer of the events.
- :mod:`.heartbeat`: a ``[working]`` line while a long step runs and nothing else is said (calls
  done, in flight, failed, tokens/s, what the step waits for).
- :mod:`.report`: the run's page, ``report.md``, from its events and result.
- :mod:`.summary`: ``summary.json`` of a run that ended or failed (``combee learn`` and ``train(out=...)``).
- :mod:`.closing`: the human summary ending a run on stderr (score, cost, where its files are).
- :mod:`.provenance`: version, commit, host, command line, times, seed and splits of a run.
- :mod:`.mlflow_log`: the MLflow logger, a consumer of the events (optional ``mlflow`` extra).
- :mod:`.compare`: runs side by side and across seeds (``combee compare``).
- :mod:`.scored`: an evaluation's per-row scores (``results.jsonl``), and two runs paired on them
  (``combee compare --paired``).
"""
