"""The core is pure: importing it loads no I/O, clock, randomness or concurrency module, and its
source imports nothing but the standard library, attrs, immutables and numpy.

Two complementary checks, because neither is enough alone:

- at run time, in a fresh interpreter: `sys.modules` before and after importing every module of
  `controller_core`. This sees what the core pulls in transitively (through attrs too), but not
  the modules the interpreter preloads itself (`os`, `io`, `time`, `_thread`, `gc`, ...);
- statically, with `ast`, over every source file of the core: what each file imports (at any
  depth, also inside functions) and which I/O builtins it calls. This catches `import time` or
  `import os` even though those modules are already loaded anyway.
"""
from __future__ import annotations

import ast
import json
import pathlib
import site
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
CORE = ROOT / "controller_core"
CORE_MODULES = sorted(
    "controller_core" if p.name == "__init__.py" else f"controller_core.{p.stem}" for p in CORE.glob("*.py")
)
ALLOWED_THIRD_PARTY = {"attrs", "immutables", "numpy"}

# I/O, networking, processes, threads, clocks, randomness, logging: none of it belongs in the core.
FORBIDDEN = {
    "asyncio", "aiozk", "anyio", "socket", "_socket", "ssl", "_ssl", "select", "selectors",
    "subprocess", "_posixsubprocess", "multiprocessing", "concurrent", "threading", "_thread", "signal",
    "gc",
    "time", "datetime", "random", "_random", "secrets", "uuid",
    "logging", "pyspark", "py4j", "prometheus_client", "rich", "matplotlib",
    "os", "io", "shutil", "tempfile", "pathlib", "glob", "fcntl", "mmap", "sqlite3", "pickle",
    "urllib", "http", "email", "ftplib", "smtplib", "webbrowser", "importlib",
}

# What attrs itself loads from that list: attr/_compat.py keeps a threading.local() for its repr
# recursion guard, and imports inspect, which imports os and importlib.machinery. attrs is an
# allowed dependency; this set pins what it brings so that anything new shows up. (The core's
# own source is checked for these by the ast tests below, since at run time they are already
# loaded when the core is imported.)
FORBIDDEN_VIA_ALLOWED_DEPENDENCIES = {"threading", "os", "importlib",
                                     # numpy (the columnar partition image) imports pickle and
                                     # datetime for its own array pickling and datetime64 support
                                     "pickle", "datetime"}

IO_BUILTINS = {"open", "print", "input", "breakpoint", "__import__"}


def _root(name: str) -> str:
    return name.split(".", 1)[0]


def _fresh_import() -> dict[str, list[str]]:
    """Import the allowed dependencies, then every core module, in a fresh interpreter; return
    the modules each stage added to sys.modules."""
    code = f"""
import sys
preloaded = set(sys.modules)
sys.path[:0] = {[str(ROOT), *site.getsitepackages()]!r}
for name in {sorted(ALLOWED_THIRD_PARTY)!r}:
    __import__(name)
after_dependencies = set(sys.modules)
for name in {CORE_MODULES!r}:
    __import__(name)
after_core = set(sys.modules)
import json
print(json.dumps({{"preloaded": sorted(preloaded),
                   "dependencies": sorted(after_dependencies - preloaded),
                   "core": sorted(after_core - after_dependencies)}}))
"""
    # -S: no `site`, so no .pth hook preloads anything (the editable install's loads pathlib and
    # importlib); site-packages goes on the path by hand. -E: no PYTHON* variables either.
    out = subprocess.run([sys.executable, "-S", "-E", "-c", code], cwd=ROOT, capture_output=True, text=True,
                         timeout=120, check=True)
    return json.loads(out.stdout)


@pytest.fixture(scope="module")
def loaded():
    return _fresh_import()


def test_every_core_module_is_covered():
    assert len(CORE_MODULES) > 10
    assert "controller_core.step" in CORE_MODULES


def test_importing_the_core_loads_no_io_module(loaded):
    assert set(CORE_MODULES) <= set(loaded["core"]), "every core module was imported"
    bad = sorted(m for m in loaded["core"] if _root(m) in FORBIDDEN)
    assert not bad, f"importing controller_core loaded {bad}"


def test_the_allowed_dependencies_load_only_the_known_extras(loaded):
    extras = {_root(m) for m in loaded["dependencies"] if _root(m) in FORBIDDEN}
    assert extras <= FORBIDDEN_VIA_ALLOWED_DEPENDENCIES, (
        f"attrs/immutables/numpy now load {sorted(extras - FORBIDDEN_VIA_ALLOWED_DEPENDENCIES)}")


def test_nothing_forbidden_is_preloaded_unnoticed(loaded):
    """The run-time check cannot see what the interpreter preloads; say which those are, so the
    static checks below are known to be the only guard for them."""
    preloaded = {_root(m) for m in loaded["preloaded"]} & FORBIDDEN
    # without `site`, CPython 3.11 still preloads io, time and _thread for its own start-up
    assert preloaded <= {"io", "time", "_thread"}, preloaded


def _sources():
    return sorted(CORE.glob("*.py"))


def _imports(tree: ast.AST):
    """(line, absolute module name or None for a relative import) for every import in a file."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            yield node.lineno, None if node.level else node.module


@pytest.mark.parametrize("path", _sources(), ids=lambda p: p.name)
def test_core_source_imports_only_stdlib_attrs_immutables_and_numpy(path):
    tree = ast.parse(path.read_text(), filename=str(path))
    bad = []
    for line, name in _imports(tree):
        if name is None:
            continue  # relative: another core module
        root = _root(name)
        if root == "controller_core" or root in ALLOWED_THIRD_PARTY or root in sys.stdlib_module_names:
            continue
        bad.append(f"{path.name}:{line}: import {name}")
    assert not bad, bad


@pytest.mark.parametrize("path", _sources(), ids=lambda p: p.name)
def test_core_source_imports_no_io_clock_or_randomness_module(path):
    tree = ast.parse(path.read_text(), filename=str(path))
    bad = [f"{path.name}:{line}: import {name}" for line, name in _imports(tree)
           if name is not None and _root(name) in FORBIDDEN]
    assert not bad, bad


def _is_main_guard(node: ast.stmt) -> bool:
    """`if __name__ == "__main__":` at module level (a script entry point, e.g. diagrams.py printing
    the README's state diagrams): it never runs when the core is imported or used."""
    return (isinstance(node, ast.If) and isinstance(node.test, ast.Compare)
            and isinstance(node.test.left, ast.Name) and node.test.left.id == "__name__"
            and len(node.test.comparators) == 1 and isinstance(node.test.comparators[0], ast.Constant)
            and node.test.comparators[0].value == "__main__")


@pytest.mark.parametrize("path", _sources(), ids=lambda p: p.name)
def test_core_source_calls_no_io_builtin(path):
    tree = ast.parse(path.read_text(), filename=str(path))
    body = ast.Module(body=[n for n in tree.body if not _is_main_guard(n)], type_ignores=[])
    bad = [f"{path.name}:{node.lineno}: {node.func.id}(...)" for node in ast.walk(body)
           if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in IO_BUILTINS]
    assert not bad, bad
