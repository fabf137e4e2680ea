"""What a user's package adds by name: learners, rollout executor backends and tasks.

A :class:`Registry` holds what combee_fast ships, by name, and finds the rest when a name is asked for:

- an **entry point** of its group (:data:`LEARNERS_GROUP`, :data:`EXECUTORS_GROUP`,
  :data:`TASKS_GROUP`) in an installed distribution, by the entry point's name: a package
  declares ``[project.entry-points."combee_fast.learners"] notes = "my_pkg.kind:NOTES"`` and
  ``--learner notes`` finds it;
- a **path** ``package.module:object`` (:func:`is_path`), imported when asked for, the working
  directory first on the import path as ``python -m`` has it (so ``combee`` run from a project's
  folder finds that project's modules).

A configuration records the name or the path as given, so a resumed run and ``combee verify`` find
the same object again. A name nothing answers, a path that does not import, or a plugin that fails
to load or is not what its registry takes is one :class:`~combee_fast.errors.ConfigError` line
naming it. Built-ins are imported only when asked for; an entry point only when its name is asked
for or every registered object is (iterating the registry's items).
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from collections.abc import Callable, Iterator, Mapping, MutableMapping
from importlib import metadata
from typing import TypeVar

from combee_fast.errors import CombeeError, ConfigError

T = TypeVar("T")

LEARNERS_GROUP = "combee_fast.learners"
"""The entry-point group of learners: each names a learner kind (:class:`~combee_fast.protocols.LearnerKind`)."""
EXECUTORS_GROUP = "combee_fast.executors"
"""The entry-point group of rollout executor backends: each names an executor class."""
TASKS_GROUP = "combee_fast.tasks"
"""The entry-point group of tasks: each names a task factory (called with the task's options)."""


def is_path(name: str) -> bool:
    """Whether ``name`` is a ``package.module:object`` path (dotted identifiers, one colon)."""
    module, sep, attribute = name.partition(":")
    return bool(sep) and all(part.isidentifier() for part in module.split(".")) and \
        all(part.isidentifier() for part in attribute.split("."))


def load_path(path: str, *, what: str) -> object:
    """The object ``path`` (``package.module:object``; ``object`` may be dotted) names; a module
    that nothing installed provides is looked for in the working directory too (put last on the
    import path, so a file there never shadows an installed module). ConfigError naming ``what``
    and the path when the module does not import (or calls ``sys.exit`` as it does) or has no
    such object."""
    module_name, _, attribute = path.partition(":")
    here = os.getcwd()
    installed = importlib.util.find_spec(module_name.partition(".")[0]) is not None
    if here not in sys.path and "" not in sys.path and not installed:
        sys.path.append(here)  # last: a module of the working folder never shadows an installed one
    try:
        value: object = importlib.import_module(module_name)
    except CombeeError:  # the module refused with its own line (e.g. an extra that is not installed)
        raise
    except SystemExit as exc:  # sys.exit() while being imported: the run must not end with its code
        raise ConfigError(f"{what} {path!r}: importing {module_name} called sys.exit({exc.code!r})") from None
    except Exception as exc:  # a user's module may fail in any way: one line saying so
        raise ConfigError(f"{what} {path!r}: cannot import {module_name}: {type(exc).__name__}: {exc}") from None
    for part in attribute.split("."):
        if not hasattr(value, part):
            raise ConfigError(f"{what} {path!r}: {module_name} has no {attribute!r}")
        value = getattr(value, part)
    return value


class Registry(MutableMapping[str, T]):
    """Objects of one kind by name (module docstring). ``what`` names them in errors (``learner``,
    ``executor.backend``, ``task``); ``builtin`` maps each shipped name to its path; ``adopt(value,
    name)`` turns what a name loaded into the registry's object, or raises ConfigError saying why
    it cannot (``name``: the name or path it was asked by). Each name is loaded once.

    As a mapping: ``registry[name]`` is the object of a built-in, registered, installed or path
    name (KeyError when nothing answers; ConfigError when it fails to load); ``registry[name] =
    value`` registers ``value`` (adopted) under ``name`` for this process; iterating gives the
    built-in, registered and installed names (paths are not listed); ``name in registry`` loads
    nothing. :meth:`load` is the lookup whose unknown name is a ConfigError listing the choices. A
    name two installed packages offer (different objects) is refused when it is asked for, naming
    both, never one taken silently."""

    def __init__(self, what: str, group: str, builtin: Mapping[str, str],
                 adopt: Callable[[object, str], T]) -> None:
        self.what, self.group, self.builtin, self._adopt = what, group, dict(builtin), adopt
        self._loaded: dict[str, T] = {}
        self._registered: list[str] = []
        self._entry_points: dict[str, metadata.EntryPoint] | None = None
        self._rivals: dict[str, list[metadata.EntryPoint]] = {}

    def installed(self) -> dict[str, metadata.EntryPoint]:
        """The entry points of the group in installed distributions, by name (a built-in's name
        is not taken over)."""
        if self._entry_points is None:
            found: dict[str, list[metadata.EntryPoint]] = {}
            for point in metadata.entry_points(group=self.group):
                same_name = found.setdefault(point.name, [])
                if all(other.value != point.value for other in same_name):  # one package seen twice is one
                    same_name.append(point)
            kept = {name: points for name, points in sorted(found.items()) if name not in self.builtin}
            self._entry_points = {name: points[0] for name, points in kept.items()}
            self._rivals = {name: points for name, points in kept.items() if len(points) > 1}
        return self._entry_points

    def names(self) -> list[str]:
        """Every name a configuration may give but a path: the built-ins, the registered, then the
        installed entry points."""
        return [*self.builtin, *self._registered, *(name for name in self.installed() if name not in self._registered)]

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __len__(self) -> int:
        return len(self.names())

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and (name in self.builtin or name in self._registered or
                                          name in self.installed() or is_path(name))

    def __getitem__(self, name: str) -> T:
        if name in self._loaded:
            return self._loaded[name]
        if name in self.builtin:
            value = load_path(self.builtin[name], what=self.what)
        elif name in self.installed():
            if name in self._rivals:
                offered = ", ".join(f"{getattr(point.dist, 'name', None) or '?'} ({point.value})"
                                    for point in self._rivals[name])
                raise ConfigError(f"{self.what} {name!r} is offered by {len(self._rivals[name])} installed packages: "
                                  f"{offered}; uninstall all but one, or give the one you mean by its path")
            value = self._load_entry_point(self.installed()[name])
        elif is_path(name):
            value = load_path(name, what=self.what)
        else:
            raise KeyError(name)
        adopted = self._loaded[name] = self._adopt(value, name)
        return adopted

    def __setitem__(self, name: str, value: T) -> None:
        self._loaded[name] = self._adopt(value, name)
        if name not in self._registered and name not in self.builtin:
            self._registered.append(name)

    def __delitem__(self, name: str) -> None:
        del self._loaded[name]
        if name in self._registered:
            self._registered.remove(name)

    def load(self, name: str) -> T:
        """The object registered as ``name`` (a built-in, registered or entry point's name, or a
        path), loaded now if it was not; ConfigError naming it when nothing answers or it fails
        to load."""
        try:
            return self[name]
        except KeyError:
            from combee_fast.suggest import did_you_mean

            raise ConfigError(f"unknown {self.what} {name!r}{did_you_mean(name, self.names())}; choose one of: "
                              f"{', '.join(self.names())} (or package.module:object)") from None

    def _load_entry_point(self, point: metadata.EntryPoint) -> object:
        where = f"{self.what} {point.name!r} (entry point {point.value!r} of group {self.group})"
        try:
            return point.load()
        except CombeeError:
            raise
        except SystemExit as exc:  # sys.exit() while being imported: the run must not end with its code
            raise ConfigError(f"{where}: importing it called sys.exit({exc.code!r})") from None
        except Exception as exc:  # an installed plugin may be broken in any way: one line naming it
            raise ConfigError(f"{where}: cannot load: {type(exc).__name__}: {exc}") from None


def adopt_callable(what: str) -> Callable[[object, str], Callable[..., object]]:
    """An ``adopt`` for a registry of factories or classes: the value itself when it is callable,
    else ConfigError naming ``what`` and the name."""

    def adopt(value: object, name: str) -> Callable[..., object]:
        if not callable(value):
            raise ConfigError(f"{what} {name!r}: {type(value).__name__} is not callable (a class or a factory)")
        return value

    return adopt
