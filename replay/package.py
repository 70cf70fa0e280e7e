"""Shipping the replay's Python code to Spark executors.

    python -m replay.package --out dist/     # writes dist/kctl-replay.zip and dist/kctl-replay-deps.zip

- `kctl-replay.zip` holds the `controller_core` and `replay` packages, the journal format
  (`adapters.journal`) and the runtime helpers the fold uses (`adapters.runtime`), source only. Give it to
  `spark-submit --py-files`, or let the job build and add it itself at start
  (`SparkContext.addPyFile`), which it does unless the code already comes from such a zip.
- `kctl-replay-deps.zip` holds pure-Python copies of the core's two dependencies, attrs and
  immutables (immutables falls back to its pure-Python map when its C extension is missing).
  The job ships it with `SparkContext.addFile`, and an executor puts it at the *end* of its
  `sys.path` only if it cannot import them itself (`ensure_deps`), so executors that have the
  packages installed keep the C extension. It is not meant for `--py-files` (that would put the
  slower copies first). The core's third dependency, numpy (its columnar partition image), has
  C extensions and is not shipped: executors need it installed, as PySpark's own Arrow stages
  do.
"""
from __future__ import annotations

import argparse
import atexit
import importlib
import os
import shutil
import sys
import tempfile
import zipfile
from pathlib import Path

CODE_ZIP = "kctl-replay.zip"
DEPS_ZIP = "kctl-replay-deps.zip"
CODE_PACKAGES = ("controller_core", "replay", "adapters.journal", "adapters.runtime")
"""`adapters.journal` holds the journal's file format, which the executors read, and
`adapters.runtime` the record parser and garbage-collector pauses the fold uses (both standard
library only); they ship with their parent package's `__init__.py`, not the rest of the shell.
tests/replay/test_package.py imports the job's modules from the zip alone."""
DEP_PACKAGES = ("attr", "attrs", "immutables")
_EXCLUDED_SUFFIXES = (".pyc", ".so", ".pyd", ".dylib")


def _package_dir(name: str) -> Path:
    module = importlib.import_module(name)
    return Path(module.__file__).resolve().parent


def _add_file(zf: zipfile.ZipFile, arcname: str, data: bytes) -> None:
    if arcname in zf.NameToInfo:
        return  # (a parent's __init__.py, shared by two subpackages shipped)
    info = zipfile.ZipInfo(arcname, date_time=(1980, 1, 1, 0, 0, 0))
    info.compress_type = zipfile.ZIP_DEFLATED
    info.external_attr = 0o644 << 16
    zf.writestr(info, data)


def _add_package(zf: zipfile.ZipFile, name: str) -> int:
    root = _package_dir(name)
    prefix = name.replace(".", "/")
    count = 0
    parent = root.parent
    for depth in range(name.count(".")):  # a subpackage needs its parents' __init__.py
        _add_file(zf, "/".join(name.split(".")[: name.count(".") - depth]) + "/__init__.py",
                  (parent / "__init__.py").read_bytes())
        parent = parent.parent
        count += 1
    for path in sorted(root.rglob("*")):
        if path.is_dir() or "__pycache__" in path.parts or path.name.endswith(_EXCLUDED_SUFFIXES):
            continue
        _add_file(zf, f"{prefix}/{path.relative_to(root).as_posix()}", path.read_bytes())
        count += 1
    return count


def build(dest: str | os.PathLike, name: str, packages: tuple[str, ...]) -> Path:
    """A zip of `packages` (as imported here) at `dest/name`; byte-identical for identical sources."""
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    target = dest / name
    tmp = target.with_name(f".{name}.tmp")
    with zipfile.ZipFile(tmp, "w") as zf:
        for package in packages:
            _add_package(zf, package)
    os.replace(tmp, target)
    return target


def build_code(dest) -> Path:
    return build(dest, CODE_ZIP, CODE_PACKAGES)


def build_deps(dest) -> Path:
    return build(dest, DEPS_ZIP, DEP_PACKAGES)


def shipped_from_zip() -> bool:
    """Is this code already running from a zip (spark-submit --py-files)?"""
    import replay

    return ".zip" in (replay.__file__ or "")


def given_to_spark_submit(sc, name: str = CODE_ZIP) -> bool:
    """Was a zip of this name given to `spark-submit --py-files`? (`spark-submit replay/job.py`
    from a checkout runs the driver from the checkout, yet the executors already get the zip;
    Spark refuses a second file of the same name.)"""
    files = sc.getConf().get("spark.submit.pyFiles", "") or ""
    return any(f.rstrip("/").rsplit("/", 1)[-1] == name for f in files.split(",") if f)


def ship(sc, workdir: str | None = None) -> dict:
    """Add the code zip (unless already shipped) and the deps zip to a SparkContext. Without a
    `workdir` they go to a temporary directory that is removed when the process exits (Spark
    reads them until its context stops, which is the process's business, not ours)."""
    if workdir is None:
        workdir = tempfile.mkdtemp(prefix="kctl-replay-")
        atexit.register(shutil.rmtree, workdir, True)
    shipped = {}
    if not shipped_from_zip() and not given_to_spark_submit(sc):
        code = build_code(workdir)
        sc.addPyFile(str(code))
        shipped["code"] = str(code)
    deps = build_deps(workdir)
    sc.addFile(str(deps))
    shipped["deps"] = str(deps)
    return shipped


def ensure_deps() -> None:
    """On an executor: make attrs and immutables importable, from the shipped zip if need be."""
    try:
        import attrs  # noqa: F401
        import immutables  # noqa: F401
        return
    except ImportError:
        pass
    from pyspark import SparkFiles

    path = SparkFiles.get(DEPS_ZIP)
    if path not in sys.path:
        sys.path.append(path)
    for name in list(sys.modules):
        if name.split(".")[0] in DEP_PACKAGES:
            del sys.modules[name]
    importlib.invalidate_caches()
    import attrs  # noqa: F401,F811
    import immutables  # noqa: F401,F811


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m replay.package", description=__doc__.split("\n\n")[0])
    p.add_argument("--out", default="dist", help="directory to write the zips into (default dist/)")
    args = p.parse_args(argv)
    for path in (build_code(args.out), build_deps(args.out)):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
