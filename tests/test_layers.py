"""The gateway's import graph: imports run down the request path, and no module imports itself back.

The graph comes from grimp, which parses every `import` in the package, including those
under `if TYPE_CHECKING:` (a type-only import still ties the two modules' designs together).
A module belongs to the layer of its longest matching prefix in LAYERS; an import may stay
within a layer or go down, never up. The last tests prove both checks fail when they should.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import grimp
import pytest

PACKAGE = "gateway"

LAYERS: tuple[tuple[str, ...], ...] = (
    ("gateway.cli", "gateway.__main__", "gateway.pins_command"),
    ("gateway.preflight",),  # what would fail at start, checked before the CLI starts anything
    ("gateway.supervisor",),  # forks workers, each of which runs one server
    ("gateway.server", "gateway.stdio_server"),  # one process: HTTP (socket, signals, drain), or stdio
    ("gateway.app",),  # assembles the aiohttp application
    ("gateway.reload",),  # live reload: a new config swapped into the running core
    ("gateway.shared_state", "gateway.components"),  # wiring: memory or Redis stores; pool, catalogue, dispatcher
    ("gateway.connections",),  # users' connections to user_oauth backends: sign-in pages, listing, revoking
    ("gateway.admin",),
    ("gateway.keys",),  # the aiohttp application's typed keys
    ("gateway.transport.http", "gateway.transport.stdio"),  # transport adapters: bytes in and out
    ("gateway.transport",),  # the exchange core and its parts (channels, sessions, streams, request log)
    ("gateway.auth", "gateway.ratelimit"),
    ("gateway.dispatch", "gateway.relay", "gateway.client_logs"),  # methods; what backends send clients
    ("gateway.tenancy",),  # the request context and the tenant policy the dispatcher applies
    ("gateway.catalogue",),
    ("gateway.oauth",),  # the gateway as an OAuth client of its backends: tokens, grants, sign-in links
    ("gateway.upstream",),
    ("gateway.audit",),  # the audit trail: records, chain, sinks; the dispatcher and admin actions write to it
    ("gateway.store", "gateway.metrics", "gateway.logs", "gateway.health", "gateway.lifecycle", "gateway.tracing"),
    ("gateway.protocol",),  # the JSON-RPC envelope and SSE framing; spec.py sits lower still
    ("gateway.protocol.errors", "gateway.config"),
    ("gateway.policy",),  # who is asking, the rules, the one decision: pure, compiled by the config
    ("gateway.protocol.spec",),  # protocol names and codes: imports nothing of the gateway
)
"""Top to bottom; the entries of one layer may import each other (the cycle test still applies)."""

Graph = Mapping[str, Iterable[str]]


def import_graph(package: str = PACKAGE) -> dict[str, set[str]]:
    """Every module of `package` and the modules of `package` it imports directly."""
    graph = grimp.build_graph(package, exclude_type_checking_imports=False, cache_dir=None)
    return {module: set(graph.find_modules_directly_imported_by(module)) for module in graph.modules}


def layer_of(module: str, layers: Sequence[Sequence[str]] = LAYERS) -> int | None:
    """The index of the layer whose longest entry is a prefix of `module` (0 is the top)."""
    best: tuple[int, int] | None = None  # (prefix length, layer index)
    for index, entries in enumerate(layers):
        for entry in entries:
            if (module == entry or module.startswith(entry + ".")) and (best is None or len(entry) > best[0]):
                best = (len(entry), index)
    return best[1] if best else None


def upward_imports(graph: Graph, layers: Sequence[Sequence[str]] = LAYERS) -> list[tuple[str, str]]:
    """Every direct import from a module to one in a higher layer, as (importer, imported)."""
    found = []
    for importer, imported in sorted(graph.items()):
        below = layer_of(importer, layers)
        for target in sorted(imported):
            above = layer_of(target, layers)
            if below is not None and above is not None and above < below:
                found.append((importer, target))
    return found


def unplaced_modules(graph: Graph, layers: Sequence[Sequence[str]] = LAYERS) -> list[str]:
    """Modules no layer claims (a new module must be given its place)."""
    return sorted(m for m in graph if m != PACKAGE and layer_of(m, layers) is None)


def child_of(package: str, module: str) -> str | None:
    """The direct child of `package` (a module or a folder) that holds `module`, if any."""
    if not module.startswith(package + "."):
        return None
    return package + "." + module[len(package) + 1:].split(".", 1)[0]


def mutual_imports(graph: Graph) -> list[tuple[str, str]]:
    """Pairs of siblings (two folders, or a folder and a module, of one package) that import each other.

    A folder imports what any module inside it imports; so a pair found here is a design loop
    even where no two single modules form a cycle.
    """
    packages = {module.rsplit(".", depth)[0] for module in graph for depth in range(1, module.count(".") + 1)}
    found = set()
    for package in packages:
        edges = set()
        for importer, imported in graph.items():
            source = child_of(package, importer)
            for target in imported:
                sink = child_of(package, target)
                if source and sink and source != sink:
                    edges.add((source, sink))
        found |= {(a, b) for a, b in edges if a < b and (b, a) in edges}
    return sorted(found)


def import_cycles(graph: Graph) -> list[list[str]]:
    """The strongly connected components with more than one module, or a module importing itself."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def visit(module: str) -> None:  # Tarjan; the gateway's graph is shallow enough to recurse
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for target in graph.get(module, ()):
            if target not in index:
                visit(target)
                low[module] = min(low[module], low[target])
            elif target in on_stack:
                low[module] = min(low[module], index[target])
        if low[module] == index[module]:
            component = []
            while not component or component[-1] != module:
                component.append(stack.pop())
                on_stack.discard(component[-1])
            if len(component) > 1 or module in graph.get(module, ()):
                cycles.append(sorted(component))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return sorted(cycles)


@pytest.fixture(scope="module")
def graph() -> dict[str, set[str]]:
    return import_graph()


def test_no_module_imports_one_from_a_higher_layer(graph: dict[str, set[str]]) -> None:
    upward = upward_imports(graph)
    assert upward == [], "upward imports:\n" + "\n".join(f"  {a} -> {b}" for a, b in upward)


def test_no_import_cycle_exists_among_gateway_modules(graph: dict[str, set[str]]) -> None:
    cycles = import_cycles(graph)
    assert cycles == [], "modules that import each other:\n" + "\n".join(f"  {', '.join(c)}" for c in cycles)


def test_no_two_folders_or_top_level_modules_import_each_other(graph: dict[str, set[str]]) -> None:
    mutual = mutual_imports(graph)
    assert mutual == [], "siblings that import each other:\n" + "\n".join(f"  {a} <-> {b}" for a, b in mutual)


def test_every_gateway_module_has_a_layer(graph: dict[str, set[str]]) -> None:
    unplaced = unplaced_modules(graph)
    assert unplaced == [], f"give these modules a place in LAYERS: {', '.join(unplaced)}"


def test_every_layer_entry_names_a_module_that_exists(graph: dict[str, set[str]]) -> None:
    missing = sorted(entry for entries in LAYERS for entry in entries if entry not in graph)
    assert missing == [], f"LAYERS names modules that do not exist: {', '.join(missing)}"


# ---------------------------------------------------------------- the checks can fail


def test_an_added_upward_import_is_reported(graph: dict[str, set[str]]) -> None:
    broken = {**graph, "gateway.protocol.errors": graph["gateway.protocol.errors"] | {"gateway.app"}}
    assert ("gateway.protocol.errors", "gateway.app") in upward_imports(broken)


def test_an_import_under_type_checking_counts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    package = tmp_path / "layers_probe"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "low.py").write_text(
        "from typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n    from layers_probe.high import High\n")
    (package / "high.py").write_text("from layers_probe.low import TYPE_CHECKING\n\nHigh = TYPE_CHECKING\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    graph = import_graph("layers_probe")
    assert graph["layers_probe.low"] == {"layers_probe.high"}
    assert import_cycles(graph) == [["layers_probe.high", "layers_probe.low"]]


def test_an_import_within_a_layer_or_downward_is_allowed() -> None:
    graph = {"gateway.logs": {"gateway.metrics", "gateway.config"}, "gateway.auth.jwks": {"gateway.auth.tokens"}}
    assert upward_imports(graph) == []


def test_a_deeper_entry_wins_over_its_package() -> None:
    assert layer_of("gateway.protocol.spec") == len(LAYERS) - 1
    assert layer_of("gateway.protocol.jsonrpc") == len(LAYERS) - 4
    assert upward_imports({"gateway.protocol.spec": {"gateway.protocol.jsonrpc"}}) == [
        ("gateway.protocol.spec", "gateway.protocol.jsonrpc")]


def test_an_added_cycle_is_reported(graph: dict[str, set[str]]) -> None:
    assert "gateway.config" in graph["gateway.cli"]
    broken = {**graph, "gateway.config": graph["gateway.config"] | {"gateway.cli"}}
    assert any({"gateway.cli", "gateway.config"} <= set(cycle) for cycle in import_cycles(broken))


def test_a_cycle_through_three_modules_and_a_self_import_are_reported() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"d"}, "e": {"a"}}
    assert import_cycles(graph) == [["a", "b", "c"], ["d"]]


def test_two_folders_importing_each_other_through_different_modules_are_reported() -> None:
    graph = {"gateway.upstream.http.eras": {"gateway.upstream.stdio.lines"},
             "gateway.upstream.stdio.eras": {"gateway.upstream.http.body"},
             "gateway.upstream.http.body": set(), "gateway.upstream.stdio.lines": set()}
    assert import_cycles(graph) == []
    assert mutual_imports(graph) == [("gateway.upstream.http", "gateway.upstream.stdio")]


def test_a_folder_and_a_top_level_module_importing_each_other_are_reported(graph: dict[str, set[str]]) -> None:
    module = next(m for m in sorted(graph) if m.count(".") == 1 and any(
        target.startswith("gateway.protocol.") for target in graph[m]))  # a top-level module above protocol/
    broken = {**graph, "gateway.protocol.jsonrpc": graph["gateway.protocol.jsonrpc"] | {module}}
    assert tuple(sorted((module, "gateway.protocol"))) in mutual_imports(broken)


def test_a_module_without_a_layer_is_reported() -> None:
    assert unplaced_modules({"gateway": set(), "gateway.newthing": set(), "gateway.protocol.errors": set()}) == [
        "gateway.newthing"]
