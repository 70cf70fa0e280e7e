"""The `kctl` command: the parser and `main()` in kctl.py, one module per command group.

`python -m adapters.cli` runs `__main__.py`; the console script calls `adapters.cli.kctl:main`.
"""
from adapters.cli.kctl import UsageError, main

__all__ = ["UsageError", "main"]
