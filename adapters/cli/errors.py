"""How `kctl` fails: bad input is a `UsageError` (one line `error: ...`, exit 2), a valid
command that cannot be carried out is a `CommandFailure` (one line, exit 1). `kctl.main` prints
both; nothing else in the command line prints an error or picks an exit code for one."""
from __future__ import annotations

import argparse


class UsageError(Exception):
    """Bad input from the command line: one line, exit 2."""


class CommandFailure(Exception):
    """A valid command that could not be carried out: one line, exit 1."""


class Parser(argparse.ArgumentParser):
    """argparse with its own errors in the same one-line form."""

    def error(self, message: str):
        raise UsageError(message)


def one_line(message: object) -> str:
    """Errors are one line, whatever the input held."""
    return " ".join(str(message).split())


def bad(message: str) -> UsageError:
    """A `UsageError` whose text keeps line breaks of the input visible as `\\n`."""
    return UsageError(str(message).replace("\r", "\\r").replace("\n", "\\n"))
