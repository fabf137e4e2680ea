"""An MLflow logger: a consumer of the run's :mod:`~combee_fast.run.events` (``--mlflow``).

:meth:`MlflowLogger.start` opens an MLflow run in experiment ``tracking.experiment`` of the
tracking store ``tracking.mlflow_uri`` (else ``MLFLOW_TRACKING_URI``, else the local file store
``mlruns``: a plain folder is a file store, allowed even though MLflow now prefers a database)
and logs the configuration as parameters (dotted names, URLs without credentials). Each
completed step logs its metrics at the step's number (validation accuracy, first-try accuracy,
the artifact's size, rollouts, tokens and dollars so far (dollars only while every role that made
calls has a price: an unknown cost is not logged as a number), critical-path and wall seconds,
failed calls);
the stop is logged as tags; :meth:`MlflowLogger.finish` logs the run's page, prompt, artifacts
and summary and ends the MLflow run (``FINISHED``, or ``FAILED``).

The logger is started before the run makes anything (its folder, its signal handlers): a store
that cannot be opened, an http(s) tracking server whose address accepts no connection (within
:data:`CONNECT_TIMEOUT_S`) or a missing ``mlflow`` package is one line, and leaves nothing.

MLflow calls are blocking I/O (files, or HTTP to a tracking server), so they run on one worker
thread fed by a bounded queue: the run's loop only enqueues. A full queue drops the record and
counts it (said at :meth:`finish`). Needs the optional ``mlflow`` extra
(``pip install -e '.[mlflow]'``, the ``mlflow-skinny`` package).
"""

from __future__ import annotations

import functools
import os
import queue
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from combee_fast.config import SessionConfig, config_to_dict
from combee_fast.errors import ConfigError
from combee_fast.money.dollars import add_dollars, total
from combee_fast.redact import strip_userinfo
from combee_fast.run.events import Event, RunStopped, StepDone

DEFAULT_STORE = "mlruns"
"""The local file store used when neither the configuration nor ``MLFLOW_TRACKING_URI`` names one."""
QUEUE_SIZE = 4096
"""Most MLflow records waiting for the worker thread."""
PARAMS_PER_BATCH = 100  # MLflow's limit per log_batch call
PARAM_CHARS = 500  # MLflow's limit on a parameter's value
CONNECT_TIMEOUT_S = 5.0
"""Seconds a tracking server's address gets to accept a connection at start-up: one that does
not is refused at once (MLflow's own client would retry it for minutes)."""
ARTIFACTS = ("report.md", "prompt.txt", "final.json", "best.json", "summary.json", "curve.png")
"""Run files logged as the MLflow run's artifacts, when the run has them."""


def tracking_uri(configured: str | None) -> str:
    """The tracking store's URI: ``configured``, else ``MLFLOW_TRACKING_URI``, else
    :data:`DEFAULT_STORE`; a path without a scheme is a local file store (``file:`` + its
    absolute path)."""
    uri = configured or os.environ.get("MLFLOW_TRACKING_URI") or DEFAULT_STORE
    if "://" in uri or uri.startswith("file:"):
        return uri
    return "file:" + str(Path(uri).resolve())


def check_reachable(uri: str) -> None:
    """:class:`ConfigError` (one line) when ``uri`` is a tracking server's (http, https) whose
    address accepts no connection within :data:`CONNECT_TIMEOUT_S` (other stores: nothing)."""
    parts = urlsplit(uri)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
        socket.create_connection((parts.hostname, port), timeout=CONNECT_TIMEOUT_S).close()
    except (OSError, ValueError) as exc:
        reason = os.strerror(exc.errno) if isinstance(exc, OSError) and exc.errno else str(exc) or type(exc).__name__
        raise ConfigError(f"--mlflow: the tracking server {strip_userinfo(uri)} is unreachable: {reason}") from None


def flat_params(table: Mapping[str, Any], prefix: str = "") -> Iterator[tuple[str, str]]:
    """``(dotted name, value as text)`` for every leaf of a nested configuration table."""
    for key, value in table.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping) and value:
            yield from flat_params(value, name + ".")
        else:
            yield name, str(value)[:PARAM_CHARS]


class MlflowLogger:
    """See the module docstring; call :meth:`start` to make one."""

    def __init__(self, client: Any, run_id: str) -> None:
        self.client = client
        self.run_id = run_id
        self.dropped = 0
        self.tokens = 0
        self.rollouts = 0
        self.dollars: dict[str, float | None] = {}
        self._queue: queue.Queue[Callable[[], None] | None] = queue.Queue(maxsize=QUEUE_SIZE)
        self._errors: list[str] = []
        self._worker = threading.Thread(target=self._work, name="combee-mlflow", daemon=True)
        self._worker.start()

    @classmethod
    def start(cls, config: SessionConfig, *, run_name: str) -> MlflowLogger:
        """An MLflow run for a run of ``config``, its parameters logged; :class:`ConfigError` in
        one line when MLflow is not installed or the store cannot be opened."""
        try:
            from mlflow.entities import Param
            from mlflow.tracking import MlflowClient
        except ImportError:
            raise ConfigError("--mlflow needs MLflow: pip install -e '.[mlflow]' (the mlflow-skinny package)") from None
        tracking = config.tracking
        uri = tracking_uri(tracking.mlflow_uri)
        check_reachable(uri)
        if uri.startswith("file:"):
            os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")  # a local folder store, as documented
        try:
            client = MlflowClient(tracking_uri=uri)
            experiment = client.get_experiment_by_name(tracking.experiment)
            experiment_id = experiment.experiment_id if experiment is not None else \
                client.create_experiment(tracking.experiment)
            run = client.create_run(experiment_id, run_name=run_name)
            params = [Param(name, value) for name, value in flat_params(config_to_dict(config, public=True))]
            for first in range(0, len(params), PARAMS_PER_BATCH):
                client.log_batch(run.info.run_id, params=params[first:first + PARAMS_PER_BATCH])
        except Exception as exc:  # any store failure: one line, before the run starts
            raise ConfigError(f"--mlflow: cannot log to the tracking store {uri}: {type(exc).__name__}: "
                              f"{str(exc).splitlines()[0] if str(exc) else ''}") from None
        return cls(client, run.info.run_id)

    def __call__(self, event: Event) -> None:
        if isinstance(event, StepDone):
            row = event.row
            self.rollouts += row.rollouts
            self.tokens += sum(row.prompt_tokens.values()) + sum(row.completion_tokens.values())
            metrics = {"size": float(row.size), "rollouts": float(self.rollouts), "tokens": float(self.tokens),
                       "critical_path_s": row.cumulative_sim_seconds, "step_wall_s": row.wall_seconds,
                       "failed_calls": float(len(row.errors))}
            add_dollars(self.dollars, row.dollars)
            if (spent := total(self.dollars)) is not None:
                metrics["dollars"] = spent
            if row.batch_size:
                metrics["first_try_accuracy"] = row.first_try_accuracy
            if row.val_accuracy is not None:
                metrics["val_accuracy"] = row.val_accuracy
            step = row.step + 1
            self._enqueue(lambda: self._log_metrics(metrics, step))
        elif isinstance(event, RunStopped):
            tags = {"combee.stopped_by": event.reason[:PARAM_CHARS] or "done", "combee.ends": event.ends,
                    "combee.steps": str(event.steps)}
            self._enqueue(lambda: [self.client.set_tag(self.run_id, k, v) for k, v in tags.items()])

    def finish(self, folder: Path | None, *, failed: bool = False) -> None:
        """Log the run's files in ``folder`` (those of :data:`ARTIFACTS` it has), end the MLflow
        run, and wait for the worker; problems are said on stderr, never raised."""
        if folder is not None:
            for name in ARTIFACTS:
                if (folder / name).is_file():
                    self._enqueue(functools.partial(self.client.log_artifact, self.run_id, str(folder / name)))
        status = "FAILED" if failed else "FINISHED"
        self._enqueue(lambda: self.client.set_terminated(self.run_id, status))
        self._queue.put(None)
        self._worker.join()
        for problem in [*self._errors, *([f"{self.dropped} records dropped (queue full)"] if self.dropped else [])]:
            print(f"combee: mlflow: {problem}", file=sys.stderr)

    # ------------------------------------------------------------------------------ worker

    def _log_metrics(self, metrics: Mapping[str, float], step: int) -> None:
        from mlflow.entities import Metric

        stamp = int(1000 * time.time())
        self.client.log_batch(self.run_id, metrics=[Metric(k, v, stamp, step) for k, v in metrics.items()])

    def _enqueue(self, work: Callable[[], Any]) -> None:
        try:
            self._queue.put_nowait(work)
        except queue.Full:
            self.dropped += 1

    def _work(self) -> None:
        while (work := self._queue.get()) is not None:
            try:
                work()
            except Exception as exc:  # a tracker's failure never stops the run
                if len(self._errors) < 5:
                    self._errors.append(f"{type(exc).__name__}: {exc}")
