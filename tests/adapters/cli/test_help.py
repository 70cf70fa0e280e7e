"""`kctl --help` everywhere: every flag of every command says what it is for, and `kctl
--version` answers."""
from __future__ import annotations

import argparse
import subprocess
import sys

from adapters.cli.kctl import build_parser


def _parsers(parser: argparse.ArgumentParser, path: tuple[str, ...] = ("kctl",)):
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _parsers(sub, path + (name,))


def test_every_flag_of_every_command_has_a_help_text():
    parsers = list(_parsers(build_parser()))
    assert len(parsers) > 10  # the walk reaches every command, `bench failover` included
    missing = [f"{' '.join(path)} {action.option_strings[-1]}"
               for path, parser in parsers for action in parser._actions
               if action.option_strings and not (action.help or "").strip()]
    assert missing == []


def test_every_command_has_a_help_line():
    for action in build_parser()._actions:
        if isinstance(action, argparse._SubParsersAction):
            assert all(choice.help for choice in action._choices_actions)
            assert {c.dest for c in action._choices_actions} == set(action.choices)


def test_kctl_version():
    done = subprocess.run([sys.executable, "-m", "adapters.cli", "--version"], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().startswith("kctl ") and done.stdout.strip().split()[1][0].isdigit()
