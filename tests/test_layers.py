"""The package's shape: no module imports from a layer above it; no import circle anywhere; the
methods and the run loop import no learner, and no module outside a learner's package imports it
or names its roles or settings; every package index lists its modules; every config default is
defined once."""

from __future__ import annotations

import ast
import typing
from collections.abc import Iterator
from pathlib import Path

import msgspec

import combee_fast
from combee_fast import config
from combee_fast.kinds import Kind
from combee_fast.learners import LEARNERS

PACKAGE = Path(combee_fast.__file__).parent


def _package_of(kind: Kind) -> str:
    """The top-level part of ``combee_fast`` that a registered kind is defined in."""
    return type(kind.raw).__module__.split(".")[1]


BUILT_IN_KINDS = {name: LEARNERS.load(name) for name in LEARNERS.builtin}
"""Every built-in learner, from the registry."""

LEARNER_PACKAGES = {_package_of(kind): kind for kind in BUILT_IN_KINDS.values()}
"""The packages that each hold one registered learner, and its kind (from the registry, not listed)."""

LAYERS = [
    {"errors", "tokens", "files", "plugins", "schema", "config", "redact", "suggest"},
    {"engine", "native"},
    {"protocols"},
    {"endpoint", "tasks", "sandbox", "mcp", "tracing"},
    {"roles", "environments"},
    {"sim", "combee", "rollouts", "money"},
    {"methods"},
    {"record"},
    {"run"},
    {"kinds"},
    set(LEARNER_PACKAGES),
    {"learners"},
    {"embedded"},
    {"readout"},
    {"session"},
    {"verify", "optimizing", "integrations"},
    {"flags", "demo", "cli"},
]
LAYER_OF = {name: level for level, names in enumerate(LAYERS) for name in names}


def _part(dotted: str) -> str | None:
    parts = dotted.split(".")
    return parts[1] if parts[0] == "combee_fast" and len(parts) > 1 else None


def _runtime_imports(tree: ast.Module) -> list[str]:
    """Modules imported at run time (``if TYPE_CHECKING:`` blocks are type hints, not imports)."""
    skipped: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and getattr(node.test, "id", None) == "TYPE_CHECKING":
            skipped.update(id(child) for child in ast.walk(node))
    found = []
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.ImportFrom) and node.module:
            found.append(node.module)
            found.extend(f"{node.module}.{alias.name}" for alias in node.names if node.module == "combee_fast")
        elif isinstance(node, ast.Import):
            found.extend(alias.name for alias in node.names)
    return found


def test_no_module_imports_from_a_layer_above_it() -> None:
    problems = []
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE)
        own = relative.parts[0].removesuffix(".py")
        if own == "__init__":
            continue
        assert own in LAYER_OF, f"{relative}: top-level part {own!r} has no layer in LAYERS"
        for imported in _runtime_imports(ast.parse(path.read_text())):
            part = _part(imported)
            if part is not None and part != own and LAYER_OF.get(part, -1) > LAYER_OF[own]:
                problems.append(f"{relative} imports {imported}")
    assert not problems, "\n".join(problems)


def test_methods_and_the_run_loop_never_import_a_learner_package() -> None:
    """Everything above the mechanisms is typed on an opaque artifact: a learner plugs in through
    :mod:`combee_fast.learners`, never by being imported by the methods or the loop."""
    problems = []
    for folder in ("methods", "run", "record", "money", "combee"):
        for path in sorted((PACKAGE / folder).rglob("*.py")):
            source = ast.parse(path.read_text())
            every = [node.module for node in ast.walk(source) if isinstance(node, ast.ImportFrom) and node.module]
            every += [alias.name for node in ast.walk(source) if isinstance(node, ast.Import) for alias in node.names]
            problems += [f"{path.relative_to(PACKAGE)} imports {name}" for name in every
                         if _part(name) in {*LEARNER_PACKAGES, "learners", "embedded", "session"}]
    assert not problems, "\n".join(problems)


def test_every_built_in_learner_is_its_own_package() -> None:
    """Each registered built-in learner's kind is ``combee_fast.<name>.kind``, one learner a package."""
    assert len(LEARNER_PACKAGES) == len(BUILT_IN_KINDS)
    for name, kind in BUILT_IN_KINDS.items():
        assert kind.name == kind.key == name and type(kind.raw).__module__ == f"combee_fast.{name}.kind"


# -- import circles ----------------------------------------------------------------------------


def _module_of(path: Path) -> str:
    """The dotted name of the package's module at ``path`` (a package: its ``__init__``)."""
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_of(path): path for path in sorted(PACKAGE.rglob("*.py"))}
"""Every module of the package, by dotted name."""


def _named_modules(path: Path, tree: ast.Module) -> Iterator[tuple[int, str]]:
    """Each ``(line, module)`` an import statement of ``path`` names, wherever it stands (module
    level, in a function, under ``if TYPE_CHECKING:``), relative imports resolved: ``from a
    import b`` names ``a.b`` when that is a module, else ``a``."""
    here = _module_of(path).split(".")
    package = here if path.name == "__init__.py" else here[:-1]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from ((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join([*package[:len(package) - node.level + 1], *([node.module] if node.module else [])])
            for alias in node.names:
                yield node.lineno, f"{base}.{alias.name}" if f"{base}.{alias.name}" in MODULES else base


def _import_graph() -> dict[str, set[str]]:
    """Module -> the modules of the package it imports (any import statement: :func:`_named_modules`)."""
    return {module: {named for _, named in _named_modules(path, ast.parse(path.read_text()))
                     if named in MODULES and named != module}
            for module, path in MODULES.items()}


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The graph's strongly connected components of more than one module (Tarjan's algorithm,
    without recursion): each a set of modules every one of which imports, through the others,
    every other."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        while work:
            node, targets = work[-1]
            target = next(targets, None)
            if target is not None:
                if target not in index:
                    index[target] = low[target] = len(index)
                    stack.append(target)
                    work.append((target, iter(sorted(graph[target]))))
                elif target in stack:
                    low[node] = min(low[node], index[target])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def _loop(graph: dict[str, set[str]], members: list[str]) -> list[str]:
    """One import loop through the first of ``members`` (a circle), shortest first: its modules in
    import order, the first again at the end."""
    start, inside = members[0], set(members)
    paths = {start: [start]}
    queue = [start]
    for node in queue:
        for target in sorted(graph[node] & inside):
            if target == start:
                return [*paths[node], start]
            if target not in paths:
                paths[target] = [*paths[node], target]
                queue.append(target)
    raise AssertionError(f"no loop through {start} in {members}")


def test_no_import_circle_anywhere_in_the_package() -> None:
    """No module imports itself through others, counting every import statement: at module level,
    inside a function and under ``if TYPE_CHECKING:`` (a circle of type hints is still a circle
    of meaning, and a deferred import only hides one). An import names the module it imports
    (``from a import b``: ``a.b`` when that is a module), not the packages above it, whose
    ``__init__`` Python also runs: a package index that re-exports its modules is not a circle."""
    graph = _import_graph()
    circles = _circles(graph)
    def file(module: str) -> str:
        return str(MODULES[module].relative_to(PACKAGE))

    shown = [f"{', '.join(map(file, members))}; one loop: {' -> '.join(map(file, _loop(graph, members)))}"
             for members in circles]
    assert not circles, "import circles:\n" + "\n".join(shown)


# -- learners' own words stay in their packages --------------------------------------------------


def _settings_types(kind: Kind) -> set[str]:
    """The names of ``kind``'s settings type and of every struct type of its own package inside it."""
    if kind.settings is None:
        return set()
    package = type(kind.raw).__module__.rsplit(".", 1)[0]
    found: set[str] = set()
    pending: list[object] = [kind.settings]
    while pending:
        hint = pending.pop()
        if isinstance(hint, type) and issubclass(hint, msgspec.Struct):
            if not hint.__module__.startswith(package) or hint.__name__ in found:
                continue
            found.add(hint.__name__)
            pending.extend(typing.get_type_hints(hint).values())
        else:
            pending.extend(typing.get_args(hint))
    return found


ROLE_OWNERS = {role.key: package for package, kind in LEARNER_PACKAGES.items() for role in kind.roles}
"""Each built-in learner's request role names, and the package of their learner."""

SETTINGS_OWNERS = {name: package for package, kind in LEARNER_PACKAGES.items() for name in _settings_types(kind)}
"""The names of each built-in learner's settings types, and the package of their learner."""


def _docstrings(tree: ast.Module) -> set[int]:
    """The ids of the string constants of ``tree`` that stand alone as statements (docstrings)."""
    return {id(node.value) for node in ast.walk(tree)
            if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)}


OUTSIDERS_ALLOWED = {
    "learners.py": "the registry: it names each built-in learner's kind by its path",
    "__init__.py": "the library surface: it re-exports public types by their module path (GEPA's settings "
                   "among them), loaded only when asked for",
    "optimizing": "combee_fast.optimize is the PyPI gepa package's optimize() over GEPA's search, grading "
                  "with ACE's generator: a front end of those two learners, as a user's program is",
    "combee/reduce.py": "the paper's reducer tree labels its calls reducer[level.index] whatever the learner "
                        "(the paper's word, which ACE's reducer role shares); playbooks keep the labels",
}
"""Modules (or folders) outside the learner packages that may name them, and why."""


def _allowed(relative: Path) -> bool:
    return any(relative == Path(place) or Path(place) in relative.parents for place in OUTSIDERS_ALLOWED)


def _learners_words(path: Path, own: str) -> Iterator[str]:
    """What ``path`` (in the package part ``own``) says of a learner package other than ``own``:
    each import of it (any import statement, and any string naming one of its modules by path,
    ``combee_fast.ace...``), each string that is one of its roles' request names (the name each
    call carries, a responder table's key, a ledger's column; a learner's short role names, as
    TextGrad's ``step``, mean that role only beside their learner), and each name of its settings
    types (an identifier, an attribute or a string), docstrings aside."""
    tree = ast.parse(path.read_text())
    others = set(LEARNER_PACKAGES) - {own}
    roles = {name: package for name, package in ROLE_OWNERS.items() if package != own}
    settings = {name: package for name, package in SETTINGS_OWNERS.items() if package != own}
    for line, module in _named_modules(path, tree):
        if _part(module) in others:
            yield f"{line}: imports {module}"
    docstrings = _docstrings(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            text = node.value
            if _part(text.split(":", 1)[0]) in others:
                yield f"{node.lineno}: names module {text!r}"
            if text in roles:
                yield f"{node.lineno}: names {roles[text]}'s role {text!r}"
            if text in settings:
                yield f"{node.lineno}: names {settings[text]}'s settings type {text!r}"
        name = node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else \
            node.name if isinstance(node, ast.alias) else None
        if name in settings:
            yield f"{getattr(node, 'lineno', '?')}: names {settings[name]}'s settings type {name}"


def test_no_module_outside_a_learners_package_imports_it_or_names_its_roles_or_settings() -> None:
    """A learner's package is the one place that knows it: no other module, ``sim/``, ``roles/``,
    ``config.py`` and ``flags.py`` included, imports it, names one of its roles (by the request
    name its calls carry) or names its settings type (or a struct type of its own inside it). The
    learner packages, their roles and their settings types come from the registry (each built-in
    kind's ``roles`` and ``settings``), so a fourth built-in learner is guarded with no edit here.
    Allowed (:data:`OUTSIDERS_ALLOWED`): the registry itself, which names each learner's kind by
    path; the library surface, which re-exports public types by path; ``optimizing/``, a front
    end of GEPA and ACE by design; the paper's reducer tree, whose call labels share ACE's word;
    and verify's role-separation table, ACE's, left to mend. Tests are outside the package."""
    problems = []
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE)
        if _allowed(relative):
            continue
        own = relative.parts[0].removesuffix(".py")
        problems += [f"{relative}:{said}" for said in _learners_words(path, own)]
    assert not problems, "\n".join(problems)


def test_each_allowance_still_allows_something() -> None:
    """An allowed outsider that no longer names a learner loses its allowance (a mended leak)."""
    for place in OUTSIDERS_ALLOWED:
        files = [PACKAGE / place] if place.endswith(".py") else sorted((PACKAGE / place).rglob("*.py"))
        assert any(next(_learners_words(path, path.relative_to(PACKAGE).parts[0].removesuffix(".py")), None)
                   for path in files), f"{place} names no learner: drop it from OUTSIDERS_ALLOWED"


def test_every_package_index_lists_its_modules() -> None:
    """Each package's ``__init__`` docstring names every module of the package."""
    problems = []
    for init in sorted(PACKAGE.rglob("__init__.py")):
        folder = init.parent
        if folder == PACKAGE:
            continue
        doc = ast.get_docstring(ast.parse(init.read_text())) or ""
        for module in sorted(p.stem for p in folder.glob("*.py") if p.stem != "__init__"):
            if f".{module}`" not in doc and f".{module}:" not in doc:
                problems.append(f"{folder.relative_to(PACKAGE)}/__init__.py does not list {module}")
    assert not problems, "\n".join(problems)


def _config_structs() -> list[type[msgspec.Struct]]:
    return [
        value for value in vars(config).values()
        if isinstance(value, type) and issubclass(value, msgspec.Struct) and value.__module__ == config.__name__
    ]


def _numeric(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value != 0


def test_every_numeric_default_is_declared_once_in_the_config_tree() -> None:
    """No two config structs carry the same setting with the same default (a hand-made copy)."""
    seen: dict[tuple[str, object], str] = {}
    repeated = []
    for struct in _config_structs():
        for field in msgspec.structs.fields(struct):
            if not _numeric(field.default):
                continue
            key = (field.name, field.default)
            if key in seen:
                repeated.append(f"{field.name}={field.default!r}: {seen[key]} and {struct.__name__}")
            seen.setdefault(key, struct.__name__)
    assert not repeated, repeated


def test_no_numeric_setting_of_the_config_tree_is_redeclared_elsewhere() -> None:
    """No struct field or CLI flag outside config.py gives a config setting a literal default."""
    owned = {field.name for struct in _config_structs() for field in msgspec.structs.fields(struct)}
    defaults = {field.default for struct in _config_structs() for field in msgspec.structs.fields(struct)
                if _numeric(field.default)}
    problems = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.name == "config.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef):
                for item in node.body:
                    if (isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name)
                            and item.target.id in owned and isinstance(item.value, ast.Constant)
                            and _numeric(item.value.value)):
                        problems.append(f"{path.relative_to(PACKAGE)}: {node.name}.{item.target.id}")
            if isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "add_argument":
                for keyword in node.keywords:
                    if (keyword.arg == "default" and isinstance(keyword.value, ast.Constant)
                            and _numeric(keyword.value.value) and keyword.value.value in defaults):
                        problems.append(f"{path.relative_to(PACKAGE)}:{node.lineno}: flag default {keyword.value.value!r}")
    assert not problems, problems
