"""An all-topics Metadata answer made of each topic's kept encoding (`metadata.TopicEncodings`,
`codec.encode_spliced`) is byte for byte the answer encoded whole, across a broker's successive
metadata caches: partitions replaced by an UpdateMetadata (new view objects), topics added and
removed, brokers leaving and coming back, every version the broker serves. And it does keep:
a topic none of whose views changed is not encoded again."""
from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from adapters.kafka import codec
from adapters.kafka import metadata as M
from controller_core.values import BrokerInfo, PartitionView, TopicPartition

BROKERS = (1, 2, 3, 4)


def _view(draw, tp):
    replicas = tuple(draw(st.lists(st.sampled_from(BROKERS), min_size=1, max_size=3, unique=True)))
    isr = tuple(draw(st.lists(st.sampled_from(replicas), max_size=len(replicas), unique=True)))
    return PartitionView(tp, draw(st.sampled_from(replicas + (-1,))), draw(st.integers(0, 5)), isr, 1, 0, replicas)


@st.composite
def lives(draw):
    """A broker's successive caches: (partitions, live broker ids, version) per answer."""
    cache = {}
    for t in range(draw(st.integers(1, 4))):
        for p in range(draw(st.integers(1, 4))):
            tp = TopicPartition(f"t{t}", p)
            cache[tp] = _view(draw, tp)
    out = []
    for _ in range(draw(st.integers(1, 5))):
        cache = dict(cache)  # as Broker._apply_metadata: a copy, changed partitions replaced
        for tp in draw(st.lists(st.sampled_from(sorted(cache)), max_size=3)) if cache else ():
            cache[tp] = _view(draw, tp)
        if draw(st.integers(0, 4)) == 0:  # a topic created or deleted
            name = f"t{draw(st.integers(0, 5))}"
            if any(tp.topic == name for tp in cache):
                cache = {tp: v for tp, v in cache.items() if tp.topic != name}
            else:
                cache[TopicPartition(name, 0)] = _view(draw, TopicPartition(name, 0))
        live = frozenset(draw(st.lists(st.sampled_from(BROKERS), min_size=1, unique=True)))
        out.append((cache, live, draw(st.sampled_from(range(10)))))
    return out


def _snapshot(cache, live):
    return M.CacheSnapshot(controller_id=2, brokers={b: BrokerInfo(b, "h", 9000 + b, None) for b in sorted(live)},
                           partitions=cache, generation=1)


@settings(max_examples=200, deadline=None)
@given(lives())
def test_the_kept_topic_entries_make_the_answer_encoded_whole(answers):
    kept = M.TopicEncodings()
    for cache, live, v in answers:
        snap = _snapshot(cache, live)
        whole = codec.encode("MetadataResponse", v, M.metadata_response(snap, {"Topics": None}, v, "c"))
        head = M.metadata_response(snap, {"Topics": None}, v, "c", {})
        entries = kept.encoded(snap.topics(), snap.brokers, v,
                               lambda e: codec.encode_element("MetadataResponse", v, "Topics", e))
        assert codec.encode_spliced("MetadataResponse", v, head, "Topics", entries) == whole


def test_a_topic_whose_views_did_not_change_is_not_encoded_again():
    views = {TopicPartition(t, p): PartitionView(TopicPartition(t, p), 1, 0, (1, 2), 1, 0, (1, 2))
             for t in ("a", "b", "c") for p in range(3)}
    kept = M.TopicEncodings()
    encoded = []

    def encode(entry):
        encoded.append(entry["Name"])
        return codec.encode_element("MetadataResponse", 9, "Topics", entry)

    snap = _snapshot(views, {1, 2})
    kept.encoded(snap.topics(), snap.brokers, 9, encode)
    assert encoded == ["a", "b", "c"]
    changed = dict(views)
    tp = TopicPartition("b", 1)
    changed[tp] = views[tp]._replace(leader=2, leader_epoch=1)  # an UpdateMetadata carried b-1
    snap = _snapshot(changed, {1, 2})
    kept.encoded(snap.topics(), snap.brokers, 9, encode)
    assert encoded == ["a", "b", "c", "b"]
    snap = _snapshot(changed, {2})  # broker 1 left: every entry names it offline now
    kept.encoded(snap.topics(), snap.brokers, 9, encode)
    assert encoded == ["a", "b", "c", "b", "a", "b", "c"]
    kept.encoded(snap.topics(), snap.brokers, 1, encode)  # another version
    assert encoded[-3:] == ["a", "b", "c"] and len(encoded) == 10
