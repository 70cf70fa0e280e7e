"""The README's state-machine diagrams, generated from the transition tables.

    python -m controller_core.diagrams

prints both Mermaid diagrams; tests/core/test_machines.py checks that README.md contains exactly
this text, so the documentation cannot drift from the tables.
"""
from .machines import PARTITION_VALID_PREVIOUS, REPLICA_VALID_PREVIOUS, mermaid


def readme_block() -> str:
    return "\n".join([
        "Partition states (`controller_core/machines.py`, `PARTITION_VALID_PREVIOUS`):", "",
        "```mermaid", mermaid(PARTITION_VALID_PREVIOUS), "```", "",
        "Replica states (`REPLICA_VALID_PREVIOUS`):", "",
        "```mermaid", mermaid(REPLICA_VALID_PREVIOUS), "```",
    ])


if __name__ == "__main__":
    print(readme_block())
