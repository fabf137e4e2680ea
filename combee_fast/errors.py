"""Exceptions raised to callers, and the process exit codes they map to. Each names what was
wrong and where.

Failures of single LLM calls are not exceptions: they are :class:`combee_fast.schema.CallError`
values recorded on the rollout or reflection they belong to, so a batch goes on. Only when most
calls of a step fail does the run stop (:class:`CallsFailed`).
"""

EXIT_OK = 0
"""The run or command finished."""
EXIT_USAGE = 2
"""A bad flag, file, configuration or endpoint, found before any work was done (or an endpoint
that stopped answering altogether)."""
EXIT_CALLS_FAILED = 3
"""The run stopped because most calls of a step (or of a validation) failed for a reason other
than an unreachable endpoint: HTTP errors, unparseable answers, replay-cache misses."""
EXIT_INTERRUPTED = 130
"""Stopped by SIGINT (Ctrl-C) or SIGTERM; a learning run so stopped can be resumed (``learn --resume``)."""


class CombeeError(Exception):
    """Base class of every error this package raises on purpose; ``exit_code`` is what the
    command line exits with when it ends a command."""

    exit_code = EXIT_USAGE


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


class EndpointUnreachable(CombeeError):
    """An endpoint did not answer a health check: names the endpoint and the cause."""


class EndpointError(CombeeError):
    """A blocking chat call (:mod:`combee_fast.endpoint.blocking`) failed: the URL and the cause."""


class ConfigError(CombeeError):
    """A configuration value is invalid: names the option and the value."""


class SplitChangedError(CombeeError):
    """A data split's content hash differs from the one the run recorded."""


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


class CallsFailed(CombeeError):
    """Most calls of a step (or of a validation) failed: names the step, the failure kinds and
    counts, and where the playbook learned so far was saved."""

    exit_code = EXIT_CALLS_FAILED


class StageTimeout(TimeoutError):
    """An item did not finish within its stage's timeout."""
