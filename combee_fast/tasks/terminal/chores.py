"""One chore of the terminal task, as stored in its split files: set-up files, instruction,
checks over the final working directory, the oracle's commands and the family's plausible
mistakes. A chore file row is the JSON of one :class:`Chore`."""

from __future__ import annotations

import base64

import msgspec

from combee_fast.sandbox.state import SetupFile, WorkState


class FileSpec(msgspec.Struct, frozen=True, omit_defaults=True):
    """A set-up file: its text (repeated and cut to ``size`` bytes when ``size`` is given), or
    its bytes in base64; its permission bits; its age in seconds at the start of the episode."""

    path: str
    text: str = ""
    b64: str | None = None
    size: int | None = None
    permissions: int = 0o644
    age_s: float = 0.0

    def data(self) -> bytes:
        if self.b64 is not None:
            return base64.b64decode(self.b64)
        raw = self.text.encode()
        if self.size is None:
            return raw
        return (raw * (self.size // max(1, len(raw)) + 1))[: self.size]

    def setup(self) -> SetupFile:
        return SetupFile(self.path, self.data(), self.permissions, self.age_s)


class Check(msgspec.Struct, frozen=True, omit_defaults=True):
    """One condition on the final state. ``kind``: ``text`` (the file's text equals ``expected``,
    a missing final newline forgiven), ``bytes`` (exactly ``expected``'s UTF-8 bytes), ``number``
    (the file holds one number equal to ``expected`` within ``tolerance``), ``absent`` (no file
    at ``path``), ``executable`` (the file's mode has an execute bit)."""

    kind: str
    path: str
    expected: str = ""
    tolerance: float = 0.0


class Chore(msgspec.Struct, frozen=True):
    """One chore (module docstring). ``family`` is its knowledge unit; ``oracle`` commands solve
    it; each of ``mistakes`` is a sequence of commands that looks right and fails its checks."""

    id: str
    family: str
    instruction: str
    files: tuple[FileSpec, ...]
    checks: tuple[Check, ...]
    oracle: tuple[str, ...]
    mistakes: tuple[tuple[str, ...], ...]

    def setup(self) -> list[SetupFile]:
        return [spec.setup() for spec in self.files]


def _number(text: str) -> float | None:
    try:
        return float(text.strip())
    except ValueError:
        return None


def _first_difference(got: str, expected: str) -> str:
    got_lines, want_lines = got.splitlines(), expected.splitlines()
    for number, (mine, theirs) in enumerate(zip(got_lines, want_lines), start=1):
        if mine != theirs:
            return f"line {number} is {mine[:60]!r}, which is not what was asked for"
    if len(got_lines) != len(want_lines):
        return f"it has {len(got_lines)} lines, not the {len(want_lines)} asked for"
    return "its bytes differ from what was asked for (whitespace or line endings)"


def failed_check(check: Check, state: WorkState) -> str | None:
    """Why ``check`` does not hold in ``state`` (None: it holds); never names the expected content."""
    data = state.files.get(check.path)
    if check.kind == "absent":
        return None if data is None and check.path not in state.links else f"{check.path} should not exist"
    if data is None:
        return f"{check.path} does not exist"
    if check.kind == "executable":
        return None if state.modes.get(check.path, 0) & 0o111 else f"{check.path} is not executable"
    text = data.decode("utf-8", errors="replace")
    if check.kind == "bytes":
        return None if data == check.expected.encode() else f"{check.path}: {_first_difference(text, check.expected)}"
    if check.kind == "number":
        value, want = _number(text), float(check.expected)
        if value is None:
            return f"{check.path} does not hold a single number"
        return None if abs(value - want) <= check.tolerance else f"{check.path} holds {value:g}, which is wrong"
    if check.kind == "text":
        wanted = check.expected.rstrip("\n")
        return None if text.rstrip("\n") == wanted else f"{check.path}: {_first_difference(text, check.expected)}"
    raise ValueError(f"unknown check kind {check.kind!r}")


def grade(chore: Chore, state: WorkState) -> tuple[float, str]:
    """``(reward, feedback)``: 1.0 when every check holds, else 0.0 and what the first failure says."""
    for check in chore.checks:
        problem = failed_check(check, state)
        if problem is not None:
            return 0.0, f"not done: {problem}"
    return 1.0, "every check passed"
