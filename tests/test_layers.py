"""The layout's one rule, checked on the source: imports only point down, and nothing cycles.

Every module of `controller_core`, `adapters`, `replay` and `benchmarks` is parsed (`ast`, no
import runs) and each of its imports, module-level or inside a function, is resolved to the
layer it lands in. `LAYERS` lists the layers from the top (the command line) to the bottom (the
pure core); a module may import its own layer or any layer below it, never one above. Within a
layer, module-to-module cycles are refused too. A failure names the offending pair.
"""
from __future__ import annotations

import ast
import collections
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[1]
PACKAGES = ("controller_core", "adapters", "replay", "benchmarks")

LAYERS: tuple[tuple[str, ...], ...] = (
    ("adapters.zk", "adapters.replica_manager"),  # old import paths, kept for one release
    ("adapters.cli",),                       # kctl: one module per command group
    ("benchmarks",),                         # kctl bench and the micro-benchmarks
    ("adapters.sim",),                       # local clusters, the TCP proxy, the chaos soak
    ("replay",),                             # the Spark replay and audit, the journal generator
    ("adapters.node",),                      # the composition root of one node
    ("adapters.kafka",),                     # Kafka's protocol at each broker
    ("adapters.admin",),                     # the admin tools' logic
    ("adapters.broker",),                    # the broker side of a node
    ("adapters.controller",),                # the controller's shell
    ("adapters.control", "adapters.observability"),  # control channel; metrics and logs
    ("adapters.journal",),                   # the journal's file format, writer and reader
    ("adapters.znodes",),                    # Kafka 2.4's ZooKeeper layout
    ("adapters.zookeeper",),                 # the ZooKeeper client and server
    ("adapters.runtime",),                   # the process's runtime (GC pauses)
    ("adapters",),                           # the package itself (empty)
    ("controller_core",),                    # the pure core
)


def _modules() -> dict[str, tuple[pathlib.Path, bool]]:
    mods = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            name = ".".join(path.relative_to(ROOT).with_suffix("").parts)
            is_package = name.endswith(".__init__")
            mods[name.removesuffix(".__init__")] = (path, is_package)
    return mods


MODULES = _modules()


def _layer(module: str) -> int:
    best, rank = -1, None
    for i, names in enumerate(LAYERS):
        for name in names:
            if (module == name or module.startswith(name + ".")) and len(name) > best:
                best, rank = len(name), i
    assert rank is not None, f"{module} is in no layer: add it to LAYERS"
    return rank


def _imports(module: str) -> set[str]:
    path, is_package = MODULES[module]
    package = module if is_package else module.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            # `from pkg import mod` imports the module; `from pkg import name` the package
            candidates = [f"{target}.{a.name}" if f"{target}.{a.name}" in MODULES else target
                          for a in node.names]
        elif isinstance(node, ast.Import):
            candidates = [a.name for a in node.names]
        else:
            continue
        for name in candidates:
            while name and name not in MODULES and "." in name:
                name = name.rpartition(".")[0]
            if name in MODULES and name != module:
                found.add(name)
    return found


GRAPH = {m: _imports(m) for m in MODULES}


def test_every_import_points_down_or_sideways():
    upward = sorted(
        f"{m} imports {t} (layer {LAYERS[_layer(t)][0]} is above {LAYERS[_layer(m)][0]})"
        for m, targets in GRAPH.items() for t in targets if _layer(t) < _layer(m))
    assert not upward, "imports that point up a layer:\n" + "\n".join(upward)


def test_no_import_cycles():
    # Package __init__ re-exports are edges too: `adapters.cli` -> `adapters.cli.kctl` is fine as
    # long as kctl does not import the package back.
    color: dict[str, int] = collections.defaultdict(int)
    cycles: list[list[str]] = []

    def visit(m: str, stack: list[str]) -> None:
        color[m] = 1
        stack.append(m)
        for t in sorted(GRAPH[m]):
            if color[t] == 1:
                cycles.append(stack[stack.index(t):] + [t])
            elif color[t] == 0:
                visit(t, stack)
        stack.pop()
        color[m] = 2

    for m in sorted(GRAPH):
        if color[m] == 0:
            visit(m, [])
    assert not cycles, "import cycles:\n" + "\n".join(" -> ".join(c) for c in cycles)


def test_the_checker_sees_an_upward_import_and_a_cycle():
    # The two rules above on a planted graph, so that a broken resolver cannot pass them vacuously.
    assert _layer("adapters.zookeeper.session") > _layer("adapters.controller.loop")
    assert "adapters.controller.loop" in GRAPH["adapters.node"]
    assert "controller_core.step" in GRAPH["adapters.controller.loop"] or any(
        t.startswith("controller_core") for t in GRAPH["adapters.controller.loop"])
