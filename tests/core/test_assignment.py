"""Partition placement: Kafka 2.4's published examples, its distribution checks, the errors, the
broker-order bug of the seeds' placement design (the broker list order must not matter) and properties over random clusters."""
from __future__ import annotations

import ast
import collections
import pathlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from controller_core import assignment
from controller_core.assignment import (
    assign_replicas_to_brokers,
    expand_partitions,
    rack_alternated_broker_list,
)


def no_racks(*ids: int) -> list[tuple[int, None]]:
    return [(broker_id, None) for broker_id in ids]


def with_racks(rack_map: dict[int, str]) -> list[tuple[int, str]]:
    return list(rack_map.items())


# --- Kafka's examples --------------------------------------------------------------------------


def test_rack_unaware_example_from_kafka_admin_tests():
    # AdminZkClientTest.testReplicaAssignment: brokers 0..4, 10 partitions, RF 3, start index 0.
    expected = {
        0: [0, 1, 2],
        1: [1, 2, 3],
        2: [2, 3, 4],
        3: [3, 4, 0],
        4: [4, 0, 1],
        5: [0, 2, 3],
        6: [1, 3, 4],
        7: [2, 4, 0],
        8: [3, 0, 1],
        9: [4, 1, 2],
    }
    assert assign_replicas_to_brokers(no_racks(0, 1, 2, 3, 4), 10, 3, 0) == expected


def test_rack_unaware_matches_the_picture_in_kafkas_doc_comment():
    # AdminUtils' comment: 5 brokers, p0..p9, three replicas, rows of 1st/2nd/3rd replicas.
    placement = assign_replicas_to_brokers(no_racks(0, 1, 2, 3, 4), 10, 3, 0)
    rows = [[None] * 5 for _ in range(6)]
    for partition, replicas in placement.items():
        for position, broker in enumerate(replicas):
            rows[2 * position + partition // 5][broker] = f"p{partition}"
    assert rows == [
        ["p0", "p1", "p2", "p3", "p4"],
        ["p5", "p6", "p7", "p8", "p9"],
        ["p4", "p0", "p1", "p2", "p3"],
        ["p8", "p9", "p5", "p6", "p7"],
        ["p3", "p4", "p0", "p1", "p2"],
        ["p7", "p8", "p9", "p5", "p6"],
    ]


def test_rack_alternated_broker_list_examples():
    rack_map = {0: "rack1", 1: "rack3", 2: "rack3", 3: "rack2", 4: "rack2", 5: "rack1"}
    assert rack_alternated_broker_list(rack_map) == [0, 3, 1, 5, 4, 2]
    without_5 = {b: r for b, r in rack_map.items() if b != 5}
    assert rack_alternated_broker_list(without_5) == [0, 3, 1, 4, 2]
    # The doc comment's example: three racks of three.
    nine = {b: f"rack{b // 3 + 1}" for b in range(9)}
    assert rack_alternated_broker_list(nine) == [0, 3, 6, 1, 4, 7, 2, 5, 8]


def test_rack_aware_example_from_admin_rack_aware_test():
    rack_map = {0: "rack1", 1: "rack3", 2: "rack3", 3: "rack2", 4: "rack2", 5: "rack1"}
    assert assign_replicas_to_brokers(with_racks(rack_map), 7, 3, 0, 0) == {
        0: [0, 3, 1],
        1: [3, 1, 5],
        2: [1, 5, 4],
        3: [5, 4, 2],
        4: [4, 2, 0],
        5: [2, 0, 3],
        6: [0, 4, 2],  # the followers shift once the leaders wrap around
    }


def check_replica_distribution(
    placement,
    rack_map,
    n_brokers,
    n_partitions,
    replication_factor,
    *,
    rack_aware=True,
    leaders_even=True,
    replicas_even=True,
):
    """Kafka's RackAwareTest.checkReplicaDistribution."""
    assert len(placement) == n_partitions
    for replicas in placement.values():
        assert len(set(replicas)) == len(replicas), "two replicas of a partition share a broker"
    leaders = collections.Counter(replicas[0] for replicas in placement.values())
    counts = collections.Counter(b for replicas in placement.values() for b in replicas)
    if rack_aware:
        assert [len({rack_map[b] for b in replicas}) for replicas in placement.values()] == [
            replication_factor
        ] * n_partitions, "two replicas of a partition share a rack"
    if leaders_even:
        assert sorted(leaders.values()) == [n_partitions // n_brokers] * n_brokers
    if replicas_even:
        per_broker = n_partitions * replication_factor // n_brokers
        assert sorted(counts.values()) == [per_broker] * n_brokers


SIX_BROKERS = {0: "rack1", 1: "rack2", 2: "rack2", 3: "rack3", 4: "rack3", 5: "rack1"}
SEEDS = [None, 0, 1, 2, 7, 42, 12345, 2**63 + 11]


def test_rack_aware_fixed_start_index():
    placement = assign_replicas_to_brokers(with_racks(SIX_BROKERS), 6, 3, 2, 0)
    check_replica_distribution(placement, SIX_BROKERS, 6, 6, 3)


@pytest.mark.parametrize("seed", SEEDS)
def test_rack_aware_random_start_index(seed):
    placement = assign_replicas_to_brokers(with_racks(SIX_BROKERS), 6, 3, seed=seed)
    check_replica_distribution(placement, SIX_BROKERS, 6, 6, 3)


def test_rack_aware_uneven_replicas():
    placement = assign_replicas_to_brokers(with_racks(SIX_BROKERS), 13, 3, 0, 0)
    check_replica_distribution(
        placement, SIX_BROKERS, 6, 13, 3, leaders_even=False, replicas_even=False
    )


@pytest.mark.parametrize("seed", SEEDS)
def test_rack_aware_uneven_racks(seed):
    rack_map = {0: "rack1", 1: "rack1", 2: "rack2", 3: "rack3", 4: "rack3", 5: "rack1"}
    placement = assign_replicas_to_brokers(with_racks(rack_map), 12, 3, seed=seed)
    check_replica_distribution(placement, rack_map, 6, 12, 3, replicas_even=False)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("n_partitions", [6, 12])
def test_rack_aware_two_replicas(seed, n_partitions):
    placement = assign_replicas_to_brokers(with_racks(SIX_BROKERS), n_partitions, 2, seed=seed)
    check_replica_distribution(placement, SIX_BROKERS, 6, n_partitions, 2)


@pytest.mark.parametrize("seed", SEEDS)
def test_rack_aware_expansion_from_partition_12(seed):
    rack_map = {6: "rack1", 7: "rack2", 8: "rack2", 9: "rack3", 10: "rack3", 11: "rack1"}
    placement = assign_replicas_to_brokers(
        with_racks(rack_map), 12, 2, start_partition_id=12, seed=seed
    )
    assert sorted(placement) == list(range(12, 24))
    check_replica_distribution(placement, rack_map, 6, 12, 2)


@pytest.mark.parametrize("seed", SEEDS)
def test_rack_aware_three_brokers_three_racks(seed):
    rack_map = {0: "rack1", 1: "rack2", 4: "rack3"}
    placement = assign_replicas_to_brokers(with_racks(rack_map), 3, 2, seed=seed)
    check_replica_distribution(placement, rack_map, 3, 3, 2)


@pytest.mark.parametrize("seed", SEEDS)
def test_rack_aware_large_number_of_partitions(seed):
    rack_map = {
        0: "rack1", 1: "rack2", 2: "rack2", 3: "rack3", 4: "rack3", 5: "rack1",
        6: "rack1", 7: "rack2", 8: "rack2", 9: "rack3", 10: "rack1", 11: "rack3",
    }  # fmt: skip
    placement = assign_replicas_to_brokers(with_racks(rack_map), 96, 3, seed=seed)
    check_replica_distribution(placement, rack_map, 12, 96, 3)


@pytest.mark.parametrize("seed", SEEDS)
def test_more_replicas_than_racks_covers_every_rack(seed):
    rack_map = {0: "rack1", 1: "rack2", 2: "rack2", 3: "rack3", 4: "rack3", 5: "rack2"}
    placement = assign_replicas_to_brokers(with_racks(rack_map), 6, 5, seed=seed)
    assert [len(r) for r in placement.values()] == [5] * 6
    assert all(len({rack_map[b] for b in r}) == 3 for r in placement.values())


@pytest.mark.parametrize("seed", SEEDS)
def test_fewer_replicas_than_racks_uses_distinct_racks(seed):
    rack_map = {0: "rack1", 1: "rack2", 2: "rack2", 3: "rack3", 4: "rack3", 5: "rack2"}
    placement = assign_replicas_to_brokers(with_racks(rack_map), 6, 2, seed=seed)
    assert [len(r) for r in placement.values()] == [2] * 6
    assert all(len({rack_map[b] for b in r}) == 2 for r in placement.values())


@pytest.mark.parametrize("seed", SEEDS)
def test_single_rack(seed):
    rack_map = {b: "rack1" for b in range(6)}
    placement = assign_replicas_to_brokers(with_racks(rack_map), 6, 3, seed=seed)
    assert [len(r) for r in placement.values()] == [3] * 6
    assert collections.Counter(r[0] for r in placement.values()) == {b: 1 for b in range(6)}


def test_skip_broker_with_replica_already_assigned():
    rack_map = {0: "a", 1: "b", 2: "c", 3: "a", 4: "a"}
    placement = assign_replicas_to_brokers(with_racks(rack_map), 6, 4, fixed_start_index=2)
    check_replica_distribution(
        placement, rack_map, 5, 6, 4, rack_aware=False, leaders_even=False, replicas_even=False
    )


# --- errors ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("n_partitions", "replication_factor", "message"),
    [
        (0, 1, "Number of partitions must be larger than 0."),
        (-3, 1, "Number of partitions must be larger than 0."),
        (10, 0, "Replication factor must be larger than 0."),
        (10, 6, "Replication factor: 6 larger than available brokers: 5."),
    ],
)
def test_invalid_requests(n_partitions, replication_factor, message):
    with pytest.raises(ValueError) as raised:
        assign_replicas_to_brokers(no_racks(0, 1, 2, 3, 4), n_partitions, replication_factor)
    assert str(raised.value) == message


def test_no_brokers():
    with pytest.raises(ValueError) as raised:
        assign_replicas_to_brokers([], 1, 1)
    assert str(raised.value) == "Replication factor: 1 larger than available brokers: 0."


def test_partial_rack_information():
    with pytest.raises(ValueError) as raised:
        assign_replicas_to_brokers([(0, "r1"), (1, None), (2, "r2")], 3, 2)
    assert str(raised.value) == (
        "Not all brokers have rack information for replica rack aware assignment."
    )


def test_duplicate_broker_ids_are_rejected():
    with pytest.raises(ValueError, match="Broker 1 is listed more than once"):
        assign_replicas_to_brokers([(1, None), (2, None), (1, None)], 1, 1)


def test_expand_must_increase():
    existing = {0: [1], 1: [2], 2: [3]}
    with pytest.raises(ValueError) as raised:
        expand_partitions(existing, no_racks(1, 2, 3), 2, topic="t")
    assert str(raised.value) == (
        "The number of partitions for a topic can only be increased. "
        "Topic t currently has 3 partitions, 2 would not be an increase."
    )
    with pytest.raises(ValueError, match="3 would not be an increase"):
        expand_partitions(existing, no_racks(1, 2, 3), 3, topic="t")


def test_expand_needs_partition_zero():
    with pytest.raises(ValueError, match="partition id 0 is missing"):
        expand_partitions({1: [1]}, no_racks(1, 2, 3), 3, topic="t")


def test_seed_must_be_an_int():
    with pytest.raises(TypeError):
        assign_replicas_to_brokers(no_racks(1, 2), 1, 1, seed="abc")


# --- randomness is an input --------------------------------------------------------------------


def test_same_seed_same_placement():
    brokers = no_racks(*range(7))
    for seed in SEEDS:
        assert assign_replicas_to_brokers(brokers, 20, 3, seed=seed) == (
            assign_replicas_to_brokers(brokers, 20, 3, seed=seed)
        )


def test_no_seed_means_start_index_zero():
    brokers = no_racks(*range(7))
    assert assign_replicas_to_brokers(brokers, 20, 3) == assign_replicas_to_brokers(
        brokers, 20, 3, 0
    )


def test_fixed_start_index_ignores_the_seed():
    brokers = no_racks(*range(7))
    assert assign_replicas_to_brokers(brokers, 20, 3, 4, seed=99) == assign_replicas_to_brokers(
        brokers, 20, 3, 4
    )


def test_seeds_reach_every_start_index_and_shift():
    brokers = no_racks(10, 20, 30, 40, 50)
    leaders, second_replicas = set(), set()
    for seed in range(200):
        placement = assign_replicas_to_brokers(brokers, 1, 2, seed=seed)
        leaders.add(placement[0][0])
        second_replicas.add((placement[0][0], placement[0][1]))
    assert leaders == {10, 20, 30, 40, 50}
    assert len(second_replicas) == 20  # every (leader, follower) pair: the shift varies too


def test_module_is_pure():
    source = pathlib.Path(assignment.__file__).read_text()
    imported = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            imported.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            imported.add((node.module or "").split(".")[0])
    assert imported <= {"__future__", "collections"}


# --- the broker list order must not matter -----------------------------------------


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize(
    "brokers", [no_racks(0, 1, 2), no_racks(1, 0, 2), no_racks(2, 1, 0)], ids=str
)
def test_seed_003_added_partition_goes_to_the_third_broker(seed, brokers):
    created = assign_replicas_to_brokers(brokers, 2, 1, seed=seed)
    added = expand_partitions(created, brokers, 3, topic="t")
    assert list(added) == [2]
    leaders = [created[0][0], created[1][0], added[2][0]]
    assert sorted(leaders) == [0, 1, 2], f"partition 2 shares a leader: {created} + {added}"


def test_seed_003_unsorted_list_from_the_article():
    # The metadata cache handed Kafka [1, 0, 2]: creation gave p0 -> 1, p1 -> 0 and adding a
    # partition put p2 on broker 0 again. Sorted, creation and expansion agree.
    created = assign_replicas_to_brokers(no_racks(1, 0, 2), 2, 1, fixed_start_index=1)
    assert created == {0: [1], 1: [2]}
    assert expand_partitions(created, no_racks(1, 0, 2), 3) == {2: [0]}


def test_expansion_example_from_the_article():
    # Five brokers, two partitions starting at broker 3, grown to five partitions.
    brokers = no_racks(0, 1, 2, 3, 4)
    created = assign_replicas_to_brokers(brokers, 2, 1, fixed_start_index=3)
    assert created == {0: [3], 1: [4]}
    assert expand_partitions(created, brokers, 5) == {2: [0], 3: [1], 4: [2]}


def test_expansion_continues_creation_with_the_same_fixed_start():
    brokers = no_racks(*range(5))
    whole = assign_replicas_to_brokers(brokers, 12, 3, 2)
    first_part = {p: r for p, r in whole.items() if p < 4}
    assert expand_partitions(first_part, list(reversed(brokers)), 12) == {
        p: r for p, r in whole.items() if p >= 4
    }


def test_expansion_when_partition_zeros_leader_is_gone():
    # Kafka takes the first broker with an id at least the old leader's.
    created = {0: [3, 4], 1: [4, 5]}
    added = expand_partitions(created, no_racks(1, 2, 4, 5), 4)
    assert added == assign_replicas_to_brokers(no_racks(1, 2, 4, 5), 2, 2, 2, 2)
    # ...or the first broker when every id is smaller.
    added = expand_partitions({0: [9]}, no_racks(1, 2), 2)
    assert added == {1: [2]}


# --- properties --------------------------------------------------------------------------------


@st.composite
def clusters(draw):
    ids = draw(st.lists(st.integers(0, 1000), min_size=1, max_size=15, unique=True))
    if draw(st.booleans()):
        racks = draw(st.lists(st.sampled_from("abcde"), min_size=len(ids), max_size=len(ids)))
        brokers = list(zip(ids, racks))
    else:
        brokers = [(broker_id, None) for broker_id in ids]
    replication_factor = draw(st.integers(1, len(ids)))
    n_partitions = draw(st.integers(1, 60))
    seed = draw(st.none() | st.integers(-(2**70), 2**70))
    return brokers, n_partitions, replication_factor, seed


@settings(max_examples=300, deadline=None)
@given(clusters(), st.integers(-1, 50), st.randoms(use_true_random=False))
def test_placement_properties(cluster, start_partition_id, shuffler):
    brokers, n_partitions, replication_factor, seed = cluster
    placement = assign_replicas_to_brokers(
        brokers, n_partitions, replication_factor, start_partition_id=start_partition_id, seed=seed
    )
    first = max(0, start_partition_id)
    assert list(placement) == list(range(first, first + n_partitions))
    ids = {broker_id for broker_id, _ in brokers}
    for replicas in placement.values():
        assert len(replicas) == replication_factor
        assert len(set(replicas)) == replication_factor
        assert set(replicas) <= ids
    leaders = collections.Counter(replicas[0] for replicas in placement.values())
    per_broker = [leaders.get(broker_id, 0) for broker_id in ids]
    assert max(per_broker) - min(per_broker) <= 1
    racks = dict(brokers)
    if racks and None not in racks.values():
        n_racks = len(set(racks.values()))
        for replicas in placement.values():
            assert len({racks[b] for b in replicas}) == min(replication_factor, n_racks)
    # The order in which brokers are given never matters.
    shuffled = list(brokers)
    shuffler.shuffle(shuffled)
    assert placement == assign_replicas_to_brokers(
        shuffled, n_partitions, replication_factor, start_partition_id=start_partition_id, seed=seed
    )


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.integers(0, 100), min_size=1, max_size=10, unique=True),
    st.integers(1, 20),
    st.integers(1, 20),
    st.integers(0, 2**32),
    st.randoms(use_true_random=False),
)
def test_expansion_keeps_leaders_round_robin(ids, created_count, added_count, seed, shuffler):
    brokers = [(broker_id, None) for broker_id in ids]
    created = assign_replicas_to_brokers(brokers, created_count, 1, seed=seed)
    shuffler.shuffle(brokers)
    added = expand_partitions(created, brokers, created_count + added_count)
    ordered = sorted(ids)
    start = ordered.index(created[0][0])
    whole = {**created, **added}
    assert [whole[p][0] for p in range(len(whole))] == [
        ordered[(start + p) % len(ordered)] for p in range(len(whole))
    ]
