"""The code zip the replay ships to Spark executors (replay/package.py) is enough on its own: an
executor whose Python has no kctl installed imports every module of the job from it.

The test process's own interpreter is started without its site-packages (`-I -S`), where the
editable install of this checkout would otherwise resolve `adapters.*` to the source tree; only
the two zips and the directory holding numpy (an executor needs numpy installed, as README says)
are on its path."""
from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy

from replay import package

NOT_ON_EXECUTORS = {"replay.generate", "replay.world"}
"""The journal generator: run on the driver's machine (`python -m replay.generate`), it drives
the ZooKeeper layout's model (`adapters.znodes`), which the zip does not hold."""


def test_the_code_zip_imports_every_module_of_the_job_without_the_project_installed(tmp_path):
    code = package.build(tmp_path, package.CODE_ZIP, package.CODE_PACKAGES)
    deps = package.build(tmp_path, package.DEPS_ZIP, package.DEP_PACKAGES)
    names = sorted(n[:-3].replace("/", ".").removesuffix(".__init__")
                   for n in zipfile.ZipFile(code).namelist() if n.endswith(".py"))
    wanted = [n for n in names if n not in NOT_ON_EXECUTORS]
    assert "replay.tasks" in wanted and "replay.fold" in wanted and "replay.job" in wanted
    site = os.path.dirname(os.path.dirname(numpy.__file__))
    script = (
        "import importlib, sys\n"
        f"sys.path[:0] = [{str(code)!r}, {str(deps)!r}]\n"
        f"sys.path.append({site!r})\n"
        "failed = []\n"
        f"for name in {wanted!r}:\n"
        "    try:\n"
        "        module = importlib.import_module(name)\n"
        f"        assert module.__file__.startswith({str(code)!r}), (name, module.__file__)\n"
        "    except Exception as exc:\n"
        "        failed.append(f'{name}: {type(exc).__name__}: {exc}')\n"
        "print('\\n'.join(failed))\n"
    )
    out = subprocess.run([sys.executable, "-I", "-S", "-c", script], cwd=tmp_path, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.strip() == "", f"modules the executors cannot import from {Path(code).name}:\n{out.stdout}"


def test_the_job_script_imports_nothing_relatively():
    """`spark-submit replay/job.py` runs the job as a script (`__main__`, no package), where a
    relative import fails as the job reaches it: the standalone-cluster test (slow) found one
    on 2026-12-06. This checks every import of the file, also those inside functions."""
    import ast

    tree = ast.parse((Path(__file__).resolve().parents[2] / "replay" / "job.py").read_text())
    relative = [(node.lineno, node.module) for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.level]
    assert relative == []
