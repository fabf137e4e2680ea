"""combee_fast: parallel prompt learning (Combee, arXiv 2604.04247) on a streaming asyncio engine.

The library surface, importable from here (each name is loaded on first use, so importing the
package stays cheap and compiles nothing: Numba kernels compile on first call or on
``combee_fast.native.warmup()``)::

    open_session, Session                  one configuration -> endpoints, a trained artifact
    optimize, optimize_async, OptimizeResult   a GEPA search over your own metric, gepa.optimize's shape
    SessionConfig, TrainConfig, ...        the configuration tree (combee_fast.config)
    load_config                            a TOML or JSON run description
    TrainResult, EvalResult                what training and evaluation return
    LEARNERS                               the registered learners (ace, gepa, textgrad) and their methods
    Playbook, Candidate, PromptVariable    what ACE, GEPA and TextGrad learn and deploy
    OnlineLearner, ThreadedLearner, ProcessLearner   embedded online learners
    Release, ReleaseConfig                 which versions serve requests, and the release policy
    CombeeError, ConfigError, ...          every error (combee_fast.errors)

An environment of your own (``--env``) takes its names from :mod:`combee_fast.environments`
(``Environment``, ``Score``, ``SetupFile``, ``Sandboxes``, ``SandboxSession``...;
``docs/environments.md``).
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

_EXPORTS: dict[str, str] = {
    "open_session": "combee_fast.session",
    "Session": "combee_fast.session",
    "optimize": "combee_fast.optimizing.api",
    "optimize_async": "combee_fast.optimizing.api",
    "OptimizeResult": "combee_fast.optimizing.result",
    "SessionConfig": "combee_fast.config",
    "TaskConfig": "combee_fast.config",
    "TrainConfig": "combee_fast.config",
    "MapConfig": "combee_fast.config",
    "CombeeConfig": "combee_fast.config",
    "GepaConfig": "combee_fast.gepa.settings",
    "PipelineConfig": "combee_fast.gepa.settings",
    "ControllerConfig": "combee_fast.config",
    "EvalConfig": "combee_fast.config",
    "TransportConfig": "combee_fast.config",
    "EndpointSpec": "combee_fast.config",
    "SamplingConfig": "combee_fast.config",
    "SimConfig": "combee_fast.config",
    "CacheConfig": "combee_fast.config",
    "OnlineConfig": "combee_fast.config",
    "EmbedConfig": "combee_fast.config",
    "ReleaseConfig": "combee_fast.config",
    "load_config": "combee_fast.config",
    "TrainResult": "combee_fast.run.train",
    "EvalResult": "combee_fast.methods.base",
    "LEARNERS": "combee_fast.learners",
    "Playbook": "combee_fast.ace.playbook",
    "Candidate": "combee_fast.gepa.candidate",
    "PromptVariable": "combee_fast.textgrad.variable",
    "Rollout": "combee_fast.schema",
    "Example": "combee_fast.schema",
    "OnlineLearner": "combee_fast.embedded.online",
    "ThreadedLearner": "combee_fast.embedded.threaded",
    "ProcessLearner": "combee_fast.embedded.process",
    "AppliedBatch": "combee_fast.embedded.online",
    "Release": "combee_fast.embedded.release",
    "CombeeError": "combee_fast.errors",
    "ConfigError": "combee_fast.errors",
    "CardError": "combee_fast.errors",
    "SplitChangedError": "combee_fast.errors",
    "PlaybookFileError": "combee_fast.errors",
    "PlaybookParseError": "combee_fast.errors",
    "TaskDataError": "combee_fast.errors",
    "ReplayCacheError": "combee_fast.errors",
    "EndpointUnreachable": "combee_fast.errors",
    "EndpointError": "combee_fast.errors",
    "ReleaseError": "combee_fast.errors",
    "CallsFailed": "combee_fast.errors",
    "LearnerProcessError": "combee_fast.errors",
    "StageTimeout": "combee_fast.errors",
    "SandboxError": "combee_fast.errors",
    "EpisodeOver": "combee_fast.errors",
    "CheckpointError": "combee_fast.errors",
    "StorageError": "combee_fast.errors",
    "RolloutError": "combee_fast.errors",
    "NothingLearned": "combee_fast.errors",
    "MetricError": "combee_fast.errors",
}

__all__ = ["__version__", *_EXPORTS]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'combee_fast' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
