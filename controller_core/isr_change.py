"""The commonest event, decided without a `Draft`: a partition leader changed an ISR.

Who emits it: the ISR-change watches (`PartitionStatesObserved(source="isr_change")`, the state
znodes of the partitions a leader shrank or expanded the ISR of), one or a few partitions at a
time, all day long; the replay re-executes every one of them. `step()` (step.py) asks `decide`
first and falls back to the drafted handler (`step._observed`, the specification) when it
declines.

What the drafted handler does with such an event, and so what this does: each listed state that
is newer than the cached one (a higher or equal znode version and a different value) replaces
the cached leader-and-ISR; no state machine moves, nothing is written, nothing is logged; the
changed partitions go out in one UpdateMetadata to every live-or-shutting-down broker, in
broker-id order, as `request_batch.emit_outbox` builds a small release (`request_batch.partition_view`'s fields,
leader -2 for a topic queued for deletion, the shared live-broker list, the sorted
shutting-down ids), all sharing one `partitions` tuple.

Why a path of its own: at 100,000 partitions the draft's set-up and finish (the request batch,
its outbox, the state rebuilt field by field, the release) cost more than the change itself;
here the partition is read from its row without building a `PartitionInfo`, one chunk's changed
columns are copied (`PartitionImage.with_leader_isr`), the state is copied with its new image,
and the requests are built.

A reassignment's watch (`source="reassignment"`) is decided the same way without the
UpdateMetadata, and a partition being reassigned is decided here as long as its reassignment
does not complete (`reassignment.maybe_complete`, which runs for every listed partition: the
ISR, after the change, still lacks a target replica). It declines (returns None, having built
nothing the caller sees) for anything else, which the draft then decides: a reassignment that
completes, a reassigning partition whose topic is gone, a partition listed twice, more than
`FEW` partitions, a partition without a cached state, a partition held whole in the image's
`odd` map, a value the columns do not hold exactly. tests/core/test_isr_change.py checks on
random clusters that `step()` gives the same state, commands and digest with and without this
path.
"""
from __future__ import annotations

from operator import attrgetter


from . import commands as C
from .request_batch import _live_brokers
from .plain_attrs import is_plain
from .state import STATE_FIELDS, ControllerState, state_from
from .values import LEADER_DURING_DELETE, PartitionView

ENABLED = True
"""Off: every ISR change goes through the draft (the tests compare both)."""

FEW = 16
"""At most this many partitions in one event (more go through the draft, whose release gathers
them from the columns)."""

_new = tuple.__new__


_state_values = attrgetter(*STATE_FIELDS)
_PARTITIONS = STATE_FIELDS.index("partitions")


def decide(state: ControllerState, event) -> tuple[ControllerState, tuple] | None:
    """`(state, commands)` of an ISR change as the drafted handler decides it, or None (see the
    module docstring)."""
    if not ENABLED:
        return None
    source = event.source
    if source != "isr_change" and source != "reassignment":
        return None
    states = event.states
    if len(states) > FEW:
        return None
    image = state.partitions
    reassigning = state.reassigning
    changed = []
    seen = set()
    for tp, li in states:
        if tp in seen:
            return None
        seen.add(tp)
        moving = reassigning and tp in reassigning
        if li is None and not moving:
            continue
        if image.odd and tp in image.odd:
            return None
        found = image.leader_isr_row(tp)
        if found is None:
            if moving:
                return None  # (its topic is gone: the draft stops watching it)
            continue  # (not a partition of this cluster: the draft ignores it too)
        cached = found[1]
        if li is None:
            now = cached
        elif cached is None:
            return None
        elif li.zk_version >= cached[4] and li != cached:
            changed.append((tp, li, found))
            now = li
        else:
            now = cached
        if moving and now is not None and _caught_up(now[2], found[2], found[4]):
            return None  # the reassignment completes: the draft decides it
    if not changed:
        return state, ()
    for tp, li, (row, was, _, _, _) in changed:
        image = image.with_leader_isr(row, li, was)
        if image is None:
            return None
    new_state = _with_partitions(state, image)
    brokers = state.brokers
    if not brokers or source != "isr_change":
        return new_state, ()  # (a reassignment's watch refreshes the cache and tells no broker)
    deleting = state.topics_to_delete
    views = tuple(_new(PartitionView, (tp, LEADER_DURING_DELETE if tp.topic in deleting else li[0], li[1], li[2],
                                       li[3], li[4], replicas, adding, removing, False))
                  for tp, li, (_, _, replicas, adding, removing) in changed)
    live = _live_brokers(brokers)
    shutting_down = tuple(sorted(state.shutting_down)) if state.shutting_down else ()
    epoch = state.epoch
    # `live` holds the brokers' values in id order, as `sorted(brokers)` lists their ids
    return new_state, tuple([_update_metadata(b, info.epoch, epoch, views, live, shutting_down)
                             for b, info in zip(sorted(brokers.keys()), live)])


def _caught_up(isr: tuple, replicas: tuple, removing: tuple) -> bool:
    """`reassignment.is_complete`: every target replica (the assigned ones not being removed) is
    in the ISR."""
    return all(r in isr for r in replicas if r not in removing)


def _with_partitions(state: ControllerState, image) -> ControllerState:
    """`attrs.evolve(state, partitions=image)` for an image, its slots set directly
    (`state.state_from`; the field's converter keeps an image as it is)."""
    values = list(_state_values(state))
    values[_PARTITIONS] = image
    return state_from(*values)


def _request_maker():
    """`SendUpdateMetadata(broker_id=, broker_epoch=, controller_epoch=, partitions=,
    live_brokers=, shutting_down=)`, built by setting its slots: an ISR change builds one per
    broker, and the frozen class's keyword `__init__` costs twice as much. Only while `is_plain`
    says the class is these six plain fields: else its own constructor."""
    cls = C.SendUpdateMetadata
    names = ("broker_id", "broker_epoch", "controller_epoch", "partitions", "live_brokers", "shutting_down")
    if not is_plain(cls, names):
        return lambda b, e, ce, p, lb, sd: cls(broker_id=b, broker_epoch=e, controller_epoch=ce, partitions=p,
                                                live_brokers=lb, shutting_down=sd)
    sets = tuple(cls.__dict__[n].__set__ for n in names)
    s0, s1, s2, s3, s4, s5 = sets
    make = object.__new__

    def build(b, e, ce, p, lb, sd):
        c = make(cls)
        s0(c, b)
        s1(c, e)
        s2(c, ce)
        s3(c, p)
        s4(c, lb)
        s5(c, sd)
        return c

    return build


_update_metadata = _request_maker()
