"""The package's shape: no module imports from a layer above it; the methods and the run loop
import no learner; every package index lists its modules; every config default is defined once."""

from __future__ import annotations

import ast
from pathlib import Path

import msgspec

import combee_fast
from combee_fast import config

PACKAGE = Path(combee_fast.__file__).parent

LAYERS = [
    {"errors", "tokens", "files", "plugins", "schema", "config", "redact", "suggest"},
    {"engine", "native"},
    {"protocols"},
    {"endpoint", "playbook", "tasks", "sandbox", "mcp", "tracing"},
    {"roles", "environments"},
    {"sim", "combee", "rollouts", "money"},
    {"methods"},
    {"record"},
    {"run"},
    {"kinds"},
    {"ace", "gepa", "textgrad"},
    {"learners"},
    {"embedded"},
    {"readout"},
    {"session"},
    {"verify", "optimizing", "integrations"},
    {"flags", "demo", "cli"},
]
LEARNER_PACKAGES = {"ace", "gepa", "textgrad"}
"""Packages that each register one learner in combee_fast.learners."""
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
                         if _part(name) in LEARNER_PACKAGES | {"learners", "embedded", "session"}]
    assert not problems, "\n".join(problems)


def test_every_learner_package_is_registered() -> None:
    from combee_fast.learners import LEARNERS

    assert set(LEARNERS.builtin) == LEARNER_PACKAGES
    for name in LEARNERS.builtin:
        kind = LEARNERS.load(name)
        assert kind.name == kind.key == name and type(kind.raw).__module__ == f"combee_fast.{name}.kind"


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
