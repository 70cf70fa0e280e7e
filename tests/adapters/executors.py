"""Stand-ins for the controller loop's executor (adapters/controller/executor.py), shared by the
tests of the loop and of its journal."""
from __future__ import annotations


class Recorder:
    """The executor's place: records the commands instead of doing I/O (nothing talks to
    ZooKeeper or to brokers; what is tested is the loop's write-ahead rule and what it decided)."""

    def __init__(self):
        self.commands: list = []

    def execute(self, commands, state) -> None:
        self.commands.extend(commands)
