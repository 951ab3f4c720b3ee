"""The server's layers point one way (DESIGN §7): api -> services -> core, services -> stores and
llm; nothing imports api but the composition root; and no module imports itself back through a
cycle, also not through an import inside a function. The client distribution (the SDK and its
tools: mcp, panel, chats) imports nothing of the server."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

import memplane
import memplane_server

PACKAGE = Path(memplane_server.__file__).parent
CLIENT_PACKAGE = Path(memplane.__file__).parent
ROOT = "memplane_server"

# What each part may import from the server package (besides itself).
ALLOWED = {
    "core": set(),
    "logs": set(),
    "settings": set(),
    "telemetry": set(),
    "embedded": {"logs"},
    "llm": {"core", "logs"},
    "stores": {"core", "logs"},
    "services": {"core", "stores", "llm", "logs", "settings"},
    "worker": {"core", "services", "logs", "settings"},
    "api": {"core", "services", "logs", "settings"},
    # The composition root and the command line put everything together.
    "runtime": {"*"},
    # The keys a process opens sealed rows with, shared by the composition root and the tools.
    "key_setup": {"core", "stores", "embedded", "settings"},
    "cli": {"*"},
    "commands": {"*"},
    "__init__": set(),
}


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(path: Path) -> set[str]:
    """Every server module the file imports, at the top or inside functions."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith(ROOT))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.startswith(ROOT):
                found.add(target)
                # `from .x import y` may name a module y of package x.
                found.update(f"{target}.{a.name}" for a in node.names)
    return found


MODULES = {module_name(p): p for p in PACKAGE.rglob("*.py")}
GRAPH = {name: {m for m in imports_of(path) if m in MODULES and m != name} for name, path in MODULES.items()}


def part_of(name: str) -> str:
    parts = name.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


@pytest.mark.parametrize("name", sorted(MODULES))
def test_imports_follow_the_layers(name):
    allowed = ALLOWED[part_of(name)]
    if "*" in allowed:
        return
    # The package itself holds only the version, which anything may read.
    wrong = sorted(m for m in GRAPH[name] if part_of(m) not in (part_of(name), "__init__", *allowed))
    assert not wrong, f"{name} imports {wrong}: {part_of(name)} may import only {sorted(allowed)}"


def test_no_import_cycles():
    state: dict[str, int] = {}  # 1 visiting, 2 done
    stack: list[str] = []

    def visit(name: str) -> None:
        state[name] = 1
        stack.append(name)
        for dep in sorted(GRAPH[name]):
            if state.get(dep) == 1:
                cycle = stack[stack.index(dep):] + [dep]
                raise AssertionError("import cycle: " + " -> ".join(cycle))
            if dep not in state:
                visit(dep)
        stack.pop()
        state[name] = 2

    for name in sorted(GRAPH):
        if name not in state:
            visit(name)


def test_no_folder_holds_more_than_fifteen_modules():
    # A wider folder hides its wings: group what belongs together into a sub-package instead.
    crowded = {str(d.relative_to(PACKAGE)): n for d in [PACKAGE, *(p for p in PACKAGE.rglob("*") if p.is_dir())]
               if (n := len(list(d.glob("*.py")))) > 15}
    assert not crowded, crowded


def test_the_client_distribution_imports_nothing_of_the_server():
    """memplane-client installs without memplane-server: the tools beside an agent (mcp, panel,
    chats) are clients of the server through the SDK, as any agent is."""
    found = {str(path.relative_to(CLIENT_PACKAGE.parent)): sorted(names)
             for path in CLIENT_PACKAGE.rglob("*.py")
             if (names := {name for name in _absolute_imports(path) if name.partition(".")[0] == ROOT})}
    assert found == {}


def _absolute_imports(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            names.add(node.module)
    return names


def test_the_rules_see_every_part():
    assert {part_of(n) for n in MODULES} <= set(ALLOWED)


def _use_cases() -> set[str]:
    """The use cases the composition root builds: the types of the Services registry's fields."""
    tree = ast.parse((PACKAGE / "services" / "registry.py").read_text())
    registry = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Services")
    return {ast.unparse(field.annotation) for field in registry.body if isinstance(field, ast.AnnAssign)}


USE_CASES = _use_cases()


@pytest.mark.parametrize("name", sorted(n for n in MODULES if part_of(n) == "services"))
def test_no_service_constructs_another(name):
    """Use cases are built once, by the composition root (runtime.build_services), and handed to the
    ones that need them: a service that built another would hide the wiring (and build it twice)."""
    built = {node.func.id if isinstance(node.func, ast.Name) else node.func.attr
             for node in ast.walk(ast.parse(MODULES[name].read_text()))
             if isinstance(node, ast.Call) and isinstance(node.func, (ast.Name, ast.Attribute))}
    assert not built & USE_CASES, f"{name} constructs {sorted(built & USE_CASES)}"


def test_the_registry_names_the_use_cases():
    assert {"WriteService", "WriteIntake", "ExtractService", "ReflectService", "Metering"} <= USE_CASES


SERVICE_MODULES = sorted(n for n in MODULES if part_of(n) == "services")


@pytest.mark.parametrize("name", SERVICE_MODULES)
def test_no_function_in_a_service_is_over_sixty_lines(name):
    """A use case reads as named steps: a longer function hides where its stages begin and end."""
    long = [f"{node.name} ({node.end_lineno - node.lineno + 1} lines)"
            for node in ast.walk(ast.parse(MODULES[name].read_text()))
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.end_lineno - node.lineno + 1 > 60]
    assert not long, f"{name}: {long}"


@pytest.mark.parametrize("name", SERVICE_MODULES)
def test_no_service_handles_the_stores_sessions(name):
    """Which session a statement runs in, and when it ends, is the store's (stores/postgres/search/reads.py
    offers a search's reads): a service that held sessions would put the transaction boundary in two layers."""
    assert f"{ROOT}.stores.postgres.session" not in GRAPH[name]


@pytest.mark.parametrize("name", [n for n in SERVICE_MODULES if n != f"{ROOT}.services.deps"])
def test_no_service_is_handed_everything(name):
    """Each wing is given what it uses (its own dependencies, filled by services/deps.py `narrowed` in
    the composition root), so a constructor says what it touches and mypy fails a service that
    reaches for more."""
    assert f"{ROOT}.services.deps" not in GRAPH[name], f"{name} imports the whole of services/deps.py"


def _wing_types() -> dict[str, tuple[set[str], set[str]]]:
    """Each wing's dependencies type (a class named *Deps in services/), with its fields and the
    settings its settings Protocol names."""
    classes = {}
    for name in SERVICE_MODULES:
        for node in ast.parse(MODULES[name].read_text()).body:
            if isinstance(node, ast.ClassDef):
                classes[node.name] = [s.target.id for s in node.body
                                      if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)], node
    wings = {}
    for cls, (names, node) in classes.items():
        if cls.endswith("Deps") and cls != "Deps":
            settings = next((ast.unparse(s.annotation) for s in node.body if isinstance(s, ast.AnnAssign)
                             and isinstance(s.target, ast.Name) and s.target.id == "settings"), None)
            wings[cls] = set(names), set(classes[settings][0]) if settings in classes else set()
    return wings


WINGS = _wing_types()


def _reached(tree: ast.AST) -> tuple[set[str], set[str]]:
    """What a module reads of `deps` / `self.deps`, and of their settings."""
    def is_deps(node: ast.expr) -> bool:
        return (isinstance(node, ast.Name) and node.id == "deps") or (
            isinstance(node, ast.Attribute) and node.attr == "deps")
    fields_, settings = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and is_deps(node.value):
            fields_.add(node.attr)
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Attribute) \
                and node.value.attr == "settings" and is_deps(node.value.value):
            settings.add(node.attr)
    return fields_, settings


@pytest.mark.parametrize("name", SERVICE_MODULES)
def test_a_service_reaches_only_for_what_its_wing_was_given(name):
    tree = ast.parse(MODULES[name].read_text())
    given = {ast.unparse(n.annotation) for n in ast.walk(tree) if isinstance(n, ast.arg) and n.arg == "deps"
             and n.annotation is not None}
    wings = [WINGS[g] for g in given if g in WINGS]
    if not wings:
        return
    reached_fields, reached_settings = _reached(tree)
    allowed_fields = set().union(*(f for f, _ in wings))
    allowed_settings = set().union(*(s for _, s in wings))
    assert reached_fields <= allowed_fields, f"{name} reaches for {sorted(reached_fields - allowed_fields)}"
    assert reached_settings <= allowed_settings, f"{name} reads {sorted(reached_settings - allowed_settings)}"


def test_the_wings_are_seen():
    assert {"SearchDeps", "WriteDeps", "ReflectionDeps", "ForgetDeps", "WatchDeps", "MemoriesDeps"} <= set(WINGS)
    assert "max_query_bytes" in WINGS["SearchDeps"][1]
