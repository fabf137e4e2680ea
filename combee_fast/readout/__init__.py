"""What a person reads of a run: consumers of its events (:mod:`combee_fast.run.events`, and an
embedded learner's, :mod:`combee_fast.embedded.events`) and readers of its record
(:mod:`combee_fast.record`); none of them reaches into the loop.

- :mod:`.progress`: the progress bar (or plain lines), a consumer of the events.
- :mod:`.heartbeat`: a ``[working]`` line while a long step runs and nothing else is said (calls
  done, in flight, failed, tokens/s, what the step waits for).
- :mod:`.notices`: what a run says on stderr as it happens (waits, overloads, re-run episodes), consumers.
- :mod:`.report`: the run's page, ``report.md``, from its events and result.
- :mod:`.predictions`: the start-up probe's batching curve and the planner's predicted against
  measured step seconds, for ``summary.json`` and ``report.md``.
- :mod:`.summary`: ``summary.json`` of a run that ended or failed (``combee learn`` and ``train(out=...)``).
- :mod:`.closing`: the human summary ending a run on stderr (score, cost, where its files are).
- :mod:`.compare`: runs side by side and across seeds (``combee compare``).
- :mod:`.scored`: an evaluation's per-row scores (``results.jsonl``), and two runs paired on them
  (``combee compare --paired``).
- :mod:`.event_log`: a consumer writing every event to a JSONL file (bounded writes, rotated).
- :mod:`.mlflow_log`: the MLflow logger, a consumer of the events (optional ``mlflow`` extra).
"""
