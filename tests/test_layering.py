"""The layering contract, read from the source (docs/development.md, "Architecture"): the configuration sits
below everything that reads it and imports nothing else of relay; the core is pure and imports only the
configuration; intake does not reach into delivery; the admin does not reach into the runtime; nothing imports the
command line."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

RELAY = Path(__file__).resolve().parent.parent / "relay"
IO_LIBRARIES = frozenset(
    {
        "aiosmtpd",
        "apprise",
        "asyncio",
        "http",
        "httpx",
        "opentelemetry",
        "prometheus_client",
        "redis",
        "requests",
        "rq",
        "smtplib",
        "socket",
        "starlette",
        "subprocess",
        "urllib3",
        "uvicorn",
    }
)
OUTER_PACKAGES = (
    "relay.web",
    "relay.people",
    "relay.intake",
    "relay.delivery",
    "relay.storage",
    "relay.admin",
    "relay.runtime",
    "relay.cli",
    "relay.tracing",
)


# A concept in one room: its model (pure, held to the core's rules), its storage and what the pipeline does with
# it side by side (docs/development.md, "Where each concept lives").
CONCEPTS = ("relay.silences", "relay.outages", "relay.digests", "relay.preferences")


def _pure(name: str) -> bool:
    return _under(name, "relay.core") or any(name == f"{c}.model" or name.startswith(f"{c}.model.") for c in CONCEPTS)


def _module(path: Path) -> str:
    parts = path.relative_to(RELAY.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path) -> set[str]:
    """Every module `path` imports, at any depth of the file (lazy imports in functions included)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found |= {f"{node.module}.{alias.name}" for alias in node.names}
    return found


MODULES = {_module(p): _imports(p) for p in sorted(RELAY.rglob("*.py"))}


def _under(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


def test_every_package_of_the_pipeline_is_there() -> None:
    for package in ("relay.config", "relay.core", *OUTER_PACKAGES, *CONCEPTS):
        assert package in MODULES, package


@pytest.mark.parametrize("module", sorted(m for m in MODULES if _pure(m)))
def test_the_core_imports_no_io_library_and_no_outer_package(module: str) -> None:
    imported = MODULES[module]
    assert not {i for i in imported if i.split(".")[0] in IO_LIBRARIES}, module
    assert not {i for i in imported if any(_under(i, p) for p in OUTER_PACKAGES)}, module


def _relay(imported: set[str]) -> set[str]:
    return {i for i in imported if _under(i, "relay")}


@pytest.mark.parametrize("module", sorted(m for m in MODULES if _under(m, "relay.config")))
def test_the_configuration_imports_nothing_else_of_relay(module: str) -> None:
    """Config models and their parsers (durations, matchers, time intervals) sit below all that reads them."""
    assert not {i for i in _relay(MODULES[module]) if not _under(i, "relay.config")}, module


@pytest.mark.parametrize("module", sorted(m for m in MODULES if _pure(m)))
def test_the_core_imports_only_itself_and_the_configuration(module: str) -> None:
    """The core and the concepts' models: pure, reading only each other and the configuration."""
    found = {i for i in _relay(MODULES[module]) if not (_pure(i) or _under(i, "relay.config") or i in CONCEPTS)}
    assert not found, module


@pytest.mark.parametrize("module", sorted(m for m in MODULES if _under(m, "relay.intake")))
def test_intake_does_not_import_delivery(module: str) -> None:
    assert not {i for i in MODULES[module] if _under(i, "relay.delivery")}, module


@pytest.mark.parametrize(
    "module", sorted(m for m in MODULES if any(_under(m, p) for p in ("relay.delivery", "relay.storage", *CONCEPTS)))
)
def test_delivery_and_storage_never_import_the_runtime(module: str) -> None:
    """The runtime builds their dependencies and hands them in (relay.delivery.context)."""
    found = {i for i in MODULES[module] if any(_under(i, p) for p in ("relay.runtime", "relay.admin"))}
    assert not found, module


@pytest.mark.parametrize("module", sorted(m for m in MODULES if _under(m, "relay.web")))
def test_the_shared_http_pieces_import_neither_the_webhook_nor_the_admin(module: str) -> None:
    """Credentials, error bodies and operation docs (relay.web) serve intake and admin alike."""
    assert not {i for i in MODULES[module] if _under(i, "relay.intake") or _under(i, "relay.admin")}, module


@pytest.mark.parametrize("module", sorted(m for m in MODULES if _under(m, "relay.people")))
def test_the_people_pages_import_neither_the_admin_nor_intake_nor_delivery(module: str) -> None:
    """People's pages stand beside the admin's: they share only relay.web, the storage and the core."""
    found = {i for i in MODULES[module] if any(_under(i, p) for p in ("relay.admin", "relay.intake", "relay.delivery"))}
    assert not found, module


@pytest.mark.parametrize("module", sorted(m for m in MODULES if _under(m, "relay.admin")))
def test_admin_does_not_import_intake(module: str) -> None:
    assert not {i for i in MODULES[module] if _under(i, "relay.intake")}, module


@pytest.mark.parametrize("module", sorted(m for m in MODULES if _under(m, "relay.admin")))
def test_admin_does_not_import_the_runtime(module: str) -> None:
    """The runtime builds the admin's handlers and hands them what they read (relay.runtime.app): what both
    need (the config generation's keys) sits below, in relay.storage."""
    assert not {i for i in MODULES[module] if _under(i, "relay.runtime")}, module


@pytest.mark.parametrize("module", sorted(m for m in MODULES if _under(m, "relay.intake")))
def test_intake_does_not_import_admin(module: str) -> None:
    assert not {i for i in MODULES[module] if _under(i, "relay.admin")}, module


@pytest.mark.parametrize("module", sorted(MODULES))
def test_only_the_tracing_adapter_imports_opentelemetry(module: str) -> None:
    """OpenTelemetry is an optional extra: everything else reaches it through relay.tracing, which imports it
    only when tracing is turned on (tests/tracing/test_off.py)."""
    found = {i for i in MODULES[module] if _under(i, "opentelemetry")}
    assert not found or module == "relay.tracing.otel", module


@pytest.mark.parametrize("module", sorted(m for m in MODULES if _under(m, "relay.tracing")))
def test_tracing_imports_only_the_configuration_and_the_core(module: str) -> None:
    """Every layer may trace, so the tracing adapter sits beside the core: it reads no outer package."""
    found = {
        i
        for i in _relay(MODULES[module])
        if not any(_under(i, p) for p in ("relay.tracing", "relay.config", "relay.core"))
    }
    assert not found, module


def test_nothing_imports_the_command_line() -> None:
    importers = {m for m, imported in MODULES.items() if not _under(m, "relay.cli") and m != "relay.__main__"}
    assert not {m for m in importers if any(_under(i, "relay.cli") for i in MODULES[m])}


def test_the_contract_sees_a_violation(tmp_path: Path) -> None:
    """The scan itself: a lazy import of Redis inside a function is found."""
    bad = tmp_path / "bad.py"
    bad.write_text("def f():\n    from redis import Redis\n    return Redis\n")
    assert "redis" in _imports(bad)


# The one module that may keep state of its own: Apprise's plugins are set up once per process there.
STATEFUL = frozenset({"relay.delivery.apprise_compat"})


def _globals(path: Path) -> list[str]:
    """The names that `global` statements of `path` assign: module state changed at run time."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [name for node in ast.walk(tree) if isinstance(node, ast.Global) for name in node.names]


def test_no_module_changes_its_own_globals_but_apprise_compat() -> None:
    """Process-wide objects (the tracer, the redactor, the runtime) are built by whoever builds the process and
    handed on: a `global` statement would make one a module's instead."""
    found = {_module(path): _globals(path) for path in RELAY.rglob("*.py") if _module(path) not in STATEFUL}
    assert {module: names for module, names in found.items() if names} == {}


def test_the_global_scan_sees_one(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("_on = None\n\ndef start():\n    global _on\n    _on = object()\n")
    assert _globals(bad) == ["_on"]


def _edges(path: Path) -> set[str]:
    """The relay modules `path` imports (`from relay.x import y` names the module `relay.x.y` when it is one)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            subs = {f"{node.module}.{a.name}" for a in node.names} & MODULES.keys()
            found |= subs or {node.module}
            if len(subs) < len(node.names):
                found.add(node.module)
    return {m for m in found if m in MODULES}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's strongly connected components of more than one module: each is a circle of imports."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while (w := stack.pop()) != v:
                component.append(w)
            if component:
                out.append(sorted([v, *component]))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_no_circle_among_relays_modules() -> None:
    """Any import counts, a lazy or a type-checking one too: a circle means two modules are one concept's or
    one of them reaches too far."""
    graph = {_module(p): _edges(p) - {_module(p)} for p in sorted(RELAY.rglob("*.py"))}
    assert _cycles(graph) == []


def test_the_circle_scan_sees_one() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
