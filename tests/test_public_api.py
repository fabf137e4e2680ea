"""The library surface: exactly these names, each importable from the package, and cheap to import."""

from __future__ import annotations

import subprocess
import sys

import combee_fast

PUBLIC = {
    "__version__", "open_session", "Session", "optimize", "optimize_async", "OptimizeResult", "SessionConfig", "TaskConfig", "TrainConfig", "MapConfig",
    "CombeeConfig", "GepaConfig", "PipelineConfig", "ControllerConfig", "EvalConfig", "TransportConfig", "EndpointSpec",
    "SamplingConfig", "SimConfig", "CacheConfig", "OnlineConfig", "EmbedConfig", "ReleaseConfig", "load_config",
    "TrainResult", "Release", "ReleaseError",
    "EvalResult", "LEARNERS", "Playbook", "Candidate", "PromptVariable", "Rollout", "Example", "OnlineLearner", "ThreadedLearner",
    "ProcessLearner", "AppliedBatch", "CombeeError", "ConfigError", "CardError", "SplitChangedError",
    "PlaybookFileError", "PlaybookParseError", "TaskDataError", "ReplayCacheError", "EndpointUnreachable",
    "EndpointError", "CallsFailed", "LearnerProcessError", "StageTimeout", "SandboxError", "EpisodeOver",
    "CheckpointError", "StorageError", "RolloutError", "NothingLearned", "MetricError",
}


def test_the_public_names_are_pinned_and_each_resolves() -> None:
    assert set(combee_fast.__all__) == PUBLIC and len(combee_fast.__all__) == len(PUBLIC)
    for name in PUBLIC:
        assert getattr(combee_fast, name) is not None, name
    assert issubclass(combee_fast.ConfigError, ValueError) and issubclass(combee_fast.CardError, combee_fast.ConfigError)
    assert set(combee_fast.LEARNERS) == {"ace", "gepa", "textgrad"}


def test_an_unknown_name_is_an_attribute_error() -> None:
    try:
        combee_fast.not_a_name  # noqa: B018
    except AttributeError as exc:
        assert "not_a_name" in str(exc)
    else:
        raise AssertionError("no AttributeError")


def test_importing_the_package_loads_neither_numba_nor_the_session() -> None:
    code = "import sys, combee_fast; print('numba' in sys.modules, 'combee_fast.session' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.stdout.split() == ["False", "False"], done.stderr


def test_every_public_exception_is_defined_in_errors() -> None:
    """Outside errors.py only the transport's own exceptions exist, and none leaves the endpoint package."""
    import ast
    from pathlib import Path

    package = Path(combee_fast.__file__).parent
    outside, transport = [], set()
    for path in sorted(package.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef) and not node.name.startswith("_") and path.name != "errors.py":
                bases = {getattr(base, "id", getattr(base, "attr", "")) for base in node.bases}
                if bases & {"Exception", "RuntimeError", "ValueError", "TimeoutError", "ConnectionError",
                            "CombeeError", "ConfigError"}:
                    (transport.add(node.name) if path.parent.name == "endpoint" else
                     outside.append(f"{path.relative_to(package)}: {node.name}"))
    assert not outside, outside
    for path in sorted(package.rglob("*.py")):
        if path.parent.name != "endpoint":
            assert not any(name in path.read_text() for name in transport), f"{path} names a transport exception"


ENVIRONMENT_NAMES = {
    "CommandResult", "Environment", "EnvironmentTask", "Example", "Observation", "SandboxSession", "Sandboxes",
    "Score", "SetupFile", "Tool", "ToolCall", "WorkState",
}


def test_what_an_environment_needs_is_one_public_module_and_each_name_is_documented() -> None:
    """``--env``'s contract (docs/environments.md): every name an environment uses, from
    ``combee_fast.environments``, each with a docstring (the reference the page points to)."""
    import combee_fast.environments as environments

    assert set(environments.__all__) == ENVIRONMENT_NAMES
    for name in ENVIRONMENT_NAMES:
        assert (getattr(environments, name).__doc__ or "").strip(), name
    for method in (environments.SandboxSession.run, environments.SandboxSession.final_state,
                   environments.SandboxSession.close, environments.Sandboxes.open, environments.Environment.check):
        assert (method.__doc__ or "").strip(), method
    assert "feedback" in (environments.Score.__doc__ or "") and "reward" in (environments.Score.__doc__ or "")
