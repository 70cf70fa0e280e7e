"""Every package of the source tree is listed in pyproject.toml, so that a wheel (not only an
editable install run from the checkout) holds the whole program."""
from __future__ import annotations

import pathlib
import tomllib

ROOT = pathlib.Path(__file__).resolve().parents[1]


def test_every_package_is_listed_in_pyproject():
    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = {".".join(p.parent.relative_to(ROOT).parts)
             for top in ("controller_core", "adapters", "replay", "benchmarks")
             for p in (ROOT / top).rglob("__init__.py")}
    assert found - listed == set(), f"packages missing from pyproject.toml: {sorted(found - listed)}"
    assert listed - found == set(), f"pyproject.toml lists packages that do not exist: {sorted(listed - found)}"
