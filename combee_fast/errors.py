"""Every exception the package raises to its callers, and the process exit codes they map to.

Each names what was wrong and where. The tree::

    Exception
    ├── CombeeError                  every error raised on purpose; ``exit_code`` for the CLI
    │   ├── ConfigError (ValueError) a bad flag, config value, file or combination   -> exit 2
    │   │   ├── CardError            an experiment card: every missing and invalid field
    │   │   ├── SplitChangedError    a split's content hash differs from the recorded one
    │   │   └── CheckpointError      a checkpoint that cannot be resumed from: unreadable, corrupt,
    │   │                            of another format, or its run's files changed since
    │   ├── PlaybookFileError        a playbook file cannot be read                   -> exit 2
    │   ├── PlaybookParseError       rendered playbook text cannot be parsed          -> exit 2
    │   ├── TaskDataError            a task's data file, with its line                -> exit 2
    │   ├── ReplayCacheError         the replay cache file, with its line             -> exit 2
    │   ├── EndpointUnreachable      an endpoint did not answer (start-up or mid-run) -> exit 2
    │   │   └── LocalServerDied      the --local server died: its signal, its server.log
    │   ├── EndpointError            a blocking chat call failed                      -> exit 2
    │   ├── SandboxError             a sandbox did not start or give its final state (its episode fails)
    │   ├── ReleaseError             approve/reject of a version that is not the candidate, or
    │   │                            of one rolled back (never published again)
    │   ├── MetricError              the user's metric (an ``optimize`` adapter, evaluator or
    │   │                            metric) raised, or returned no score, on a row    -> exit 2
    │   ├── CallsFailed              most calls (or agent episodes) of a run failed   -> exit 3
    │   │   └── NothingLearned       the run ends with an empty artifact: every lesson dropped
    │   └── StorageError             a file could not be written (a full disk...)      -> exit 4
    ├── RolloutError (ValueError)           a malformed rollout submitted to an embedded learner
    ├── LearnerProcessError (RuntimeError)  an embedded learner's child process (or thread) died
    ├── StageTimeout (TimeoutError)         an item exceeded its stage's deadline
    └── EpisodeOver                         raised into an agent that calls the model after its episode ended

Failures of single LLM calls are not exceptions: they are :class:`combee_fast.schema.CallError`
values recorded on the rollout or reflection they belong to, so a batch goes on. Only when most
calls of a step fail does the run stop (:class:`CallsFailed`). Transport-level exceptions inside
:mod:`combee_fast.endpoint` never leave it: they become ``CallError`` values.
"""

EXIT_OK = 0
"""The run or command finished."""
EXIT_USAGE = 2
"""A bad flag, file, configuration or endpoint, found before any work was done (or an endpoint
that stopped answering altogether)."""
EXIT_CALLS_FAILED = 3
"""The run stopped because most calls of a step (or of a validation) failed for a reason other
than an unreachable endpoint: HTTP errors, unparseable answers, replay-cache misses; or it
learned nothing (every lesson proposed was dropped)."""
EXIT_STORAGE = 4
"""The machine failed the command: a file could not be written (a full disk, a read-only file
system, an I/O error). What was written before is intact; a learning run can be resumed."""
EXIT_INTERRUPTED = 130
"""Stopped by SIGINT (Ctrl-C) or SIGTERM; a learning run so stopped can be resumed (``learn --resume``)."""


class CombeeError(Exception):
    """Base class of every error this package raises on purpose; ``exit_code`` is what the
    command line exits with when it ends a command."""

    exit_code = EXIT_USAGE


class ConfigError(CombeeError, ValueError):
    """A configuration value, flag, file or combination is invalid: names the option and the value."""


class CardError(ConfigError):
    """An experiment card is incomplete or inconsistent; ``missing`` and ``invalid`` list every problem."""

    def __init__(self, path: str, missing: list[str], invalid: list[str]) -> None:
        parts = []
        if missing:
            parts.append(f"{len(missing)} missing field{'s' * (len(missing) != 1)}: {', '.join(missing)}")
        if invalid:
            parts.append(f"{len(invalid)} invalid: {'; '.join(invalid)}")
        super().__init__(f"card {path}: " + "; ".join(parts))
        self.missing = missing
        self.invalid = invalid


class SplitChangedError(ConfigError):
    """A data split's content hash differs from the one the run recorded."""


class CheckpointError(ConfigError):
    """A run's checkpoint cannot be resumed from: names the file and why (missing, a pickle of an
    older version, cut, corrupt, of another format or learner, or a run file changed since)."""


class PlaybookFileError(CombeeError):
    """A playbook file could not be read: names the file and the problem."""

    def __init__(self, path: str, problem: str) -> None:
        super().__init__(f"{path}: {problem}")
        self.path = path
        self.problem = problem


class PlaybookParseError(CombeeError):
    """Rendered playbook text could not be parsed: names the line."""

    def __init__(self, line_number: int, line: str, problem: str) -> None:
        super().__init__(f"line {line_number}: {problem}: {line!r}")
        self.line_number = line_number
        self.line = line
        self.problem = problem


class TaskDataError(CombeeError):
    """A task's data file is unusable: names the file, the line (1-based) and the problem."""

    def __init__(self, path: str, line: int | None, problem: str) -> None:
        where = path if line is None else f"{path}:{line}"
        super().__init__(f"{where}: {problem}")
        self.path = path
        self.line = line
        self.problem = problem


class ReplayCacheError(CombeeError):
    """The cache file is unreadable or holds a bad line: names the file and the line."""


class EndpointUnreachable(CombeeError):
    """An endpoint did not answer a health check, or stopped answering: names the endpoint and the cause."""


class LocalServerDied(EndpointUnreachable):
    """The ``--local`` server died (at start-up, on its one-token self-test, or during the run):
    names the signal or exit status, its ``server.log`` and the remedy."""


class EndpointError(CombeeError):
    """A blocking chat call (:mod:`combee_fast.endpoint.blocking`) failed: the URL and the cause."""


class SandboxError(CombeeError):
    """A sandbox did not start, or did not give its final state: names why. The episode it
    belonged to fails (``env_error``); the run goes on."""


class ReleaseError(CombeeError):
    """A release request that cannot be honoured: approving or rejecting a version that is not
    the candidate (naming the candidate), or one that was rolled back."""


class MetricError(CombeeError):
    """The user's metric call (:func:`combee_fast.optimize`: an adapter's ``evaluate``, an
    evaluator, a metric) raised, or returned what is not a score, on one row: names it and the row."""


class CallsFailed(CombeeError):
    """Most calls of a step (or of a validation) failed: names the step, the failure kinds and
    counts, and where the artifact learned so far was saved."""

    exit_code = EXIT_CALLS_FAILED


class StorageError(CombeeError):
    """A file could not be written or read back for a reason of the machine (a full disk, a
    read-only file system, an I/O error): names the file and the system's reason."""

    exit_code = EXIT_STORAGE


class RolloutError(ValueError):
    """A rollout submitted to an embedded learner is malformed (not a Rollout, a field of the
    wrong type, a negative round, a score that is not a number): names the rollout and the field.
    The learner never saw it."""


class NothingLearned(CallsFailed):
    """The run ends with an empty artifact although its steps proposed lessons: every one was
    rejected or evicted (a token budget too small to hold one, say). Names the counts."""


class LearnerProcessError(RuntimeError):
    """An embedded learner's child process (or its thread) failed or exited early: says how (its
    exit code and last error line); its unsettled tickets fail with it."""


class StageTimeout(TimeoutError):
    """An item did not finish within its stage's timeout."""


class EpisodeOver(Exception):
    """Raised into an agent that asks for a model turn after its episode ended or ran out of steps."""


class McpFailure(CombeeError):
    """An MCP server connection failed (:mod:`combee_fast.mcp`): ``kind`` says how (one of
    :data:`combee_fast.mcp.client.FAILURE_KINDS`), the message what happened. Fails the episode."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(f"{kind}: {message}")
        self.kind = kind
        self.message = message


class McpToolError(CombeeError):
    """An MCP server refused a tool call with a JSON-RPC error (an unknown tool, bad arguments): the
    agent's mistake; the connection goes on."""


class CustomerFailed(CombeeError):
    """A tau2 episode's customer (the ``user`` role) could not answer: its model call failed."""
