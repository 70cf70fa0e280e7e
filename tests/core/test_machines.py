"""Both state machines over every (current, target) pair, against Kafka 2.4's tables."""
import pytest

from controller_core.machines import (
    PARTITION_VALID_PREVIOUS,
    REPLICA_VALID_PREVIOUS,
    PartitionState as P,
    ReplicaState as R,
    mermaid,
    partition_transition_ok,
    replica_transition_ok,
)

# Kafka 2.4's PartitionStateMachine, written out independently of the table under test
PARTITION_LEGAL = {
    (P.NON_EXISTENT, P.NEW),
    (P.NEW, P.ONLINE), (P.ONLINE, P.ONLINE), (P.OFFLINE, P.ONLINE),
    (P.NEW, P.OFFLINE), (P.ONLINE, P.OFFLINE), (P.OFFLINE, P.OFFLINE),
    (P.OFFLINE, P.NON_EXISTENT),
}
REPLICA_LEGAL = {
    (R.NON_EXISTENT, R.NEW),
    (R.NEW, R.ONLINE), (R.ONLINE, R.ONLINE), (R.OFFLINE, R.ONLINE), (R.DELETION_INELIGIBLE, R.ONLINE),
    (R.NEW, R.OFFLINE), (R.ONLINE, R.OFFLINE), (R.OFFLINE, R.OFFLINE), (R.DELETION_INELIGIBLE, R.OFFLINE),
    (R.OFFLINE, R.DELETION_STARTED),
    (R.DELETION_STARTED, R.DELETION_SUCCESSFUL),
    (R.OFFLINE, R.DELETION_INELIGIBLE), (R.DELETION_STARTED, R.DELETION_INELIGIBLE),
    (R.DELETION_SUCCESSFUL, R.NON_EXISTENT),
}


@pytest.mark.parametrize("current", list(P))
@pytest.mark.parametrize("target", list(P))
def test_partition_transition(current, target):
    assert partition_transition_ok(current, target) == ((current, target) in PARTITION_LEGAL)


@pytest.mark.parametrize("current", list(R))
@pytest.mark.parametrize("target", list(R))
def test_replica_transition(current, target):
    assert replica_transition_ok(current, target) == ((current, target) in REPLICA_LEGAL)


def test_tables_cover_every_state():
    assert set(PARTITION_VALID_PREVIOUS) == set(P)
    assert set(REPLICA_VALID_PREVIOUS) == set(R)


def test_state_names_are_kafkas():
    assert [s.value for s in P] == ["NonExistentPartition", "NewPartition", "OnlinePartition", "OfflinePartition"]
    assert str(R.DELETION_INELIGIBLE) == "ReplicaDeletionIneligible"


def test_diagram_is_generated_from_the_table():
    text = mermaid(PARTITION_VALID_PREVIOUS)
    assert text.startswith("stateDiagram-v2")
    assert text.count("-->") == len(PARTITION_LEGAL)
    assert "    OfflinePartition --> NonExistentPartition" in text.splitlines()


def test_readme_diagrams_are_the_generated_ones():
    from pathlib import Path

    from controller_core.diagrams import readme_block

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    assert readme_block() in readme, "README.md's state diagrams are stale: paste `python -m controller_core.diagrams`"
