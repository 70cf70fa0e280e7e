"""What the codec encodes: the top-level types and their schema versions (`VERSIONS`,
`UPGRADES`), and the tables that shape the layout (positional classes, map fields, interned
strings, shared values). See controller_core/codec.py for the layout and for how versions are
bumped; codec.py re-exports the public names, and codec_compiler.py follows the layout tables.
"""
from __future__ import annotations

from typing import Any, Callable

from . import columns as _columns
from . import commands as _commands
from . import request_batch as _batch
from . import events as _events
from .machines import ReplicaState
from .state import ControllerState, PartitionInfo, TopicInfo
from .values import BrokerInfo, LeaderIsr, PartitionView, ReplicaAssignment, TopicPartition

# -- tables ---------------------------------------------------------------------------------------

_POSITIONAL: dict[type, int | None] = {
    # class -> how many leading fields are always written (None: all of them); the remaining
    # (defaulted) fields are written only when one of them differs from its default.
    TopicPartition: None,
    LeaderIsr: None,
    ReplicaAssignment: 1,
    PartitionInfo: None,
    PartitionView: 7,
    _commands.PartitionWrite: None,
}
"""The hot value types, encoded as positional lists (see the docstring of codec.py)."""

_MAP_FIELDS: dict[tuple[type, str], tuple[Any, Any]] = {
    (ControllerState, "brokers"): (int, BrokerInfo),
    (ControllerState, "topics"): (str, TopicInfo),
    (ControllerState, "topic_configs"): (str, tuple[tuple[str, str], ...]),
    (ControllerState, "partitions"): (TopicPartition, PartitionInfo),
    (ControllerState, "pending"): (int, _batch.Outbox),
    (_batch.Outbox, "intents"): (TopicPartition, tuple[tuple[str | int, ...], ...]),
}
"""Key and value types of the persistent-map fields, whose hints say only `PMap`."""

_COLUMNAR_FIELDS: dict[tuple[type, str], tuple[Callable, Callable]] = {
    (ControllerState, "partitions"): (_columns.encode_columns, _columns.decode_columns),
}
"""Map fields written as columns when the value allows it (a JSON object, see
columns.encode_columns), else as the map; both forms decode."""

_INTERNED_STR_FIELDS: frozenset[tuple[type, str]] = frozenset({(TopicPartition, "topic")})
"""Strings decoded here go through `sys.intern`: one topic name object per topic, not per
partition (json.loads makes a fresh string for every occurrence)."""

_SHARED_TUPLES = {tuple[int, ReplicaState]}
"""Fixed tuples of these shapes are shared between equal decoded values, as the core does for
replica-state pairs (there are brokers x 7 of them, not one per replica)."""

_SHARED_VALUES = {ReplicaAssignment}
"""Positional classes whose equal decoded values are shared: with RF 3 on 5 brokers, 100,000
partitions have 60 distinct assignments. Saves memory and most of their decoding time."""

EVENT_TYPES: tuple[type, ...] = _events.EVENT_TYPES
COMMAND_TYPES: tuple[type, ...] = _commands.COMMAND_TYPES
STATE_TYPES: tuple[type, ...] = (ControllerState,)

VERSIONS: dict[str, int] = {cls.__name__: 1 for cls in EVENT_TYPES + COMMAND_TYPES + STATE_TYPES}
"""Current schema version per top-level type name. Bump one entry (and add an upgrader) when
that type's encoding changes."""
VERSIONS["ControllerState"] = 7  # v2: `deferred` (events waiting for a write's outcome); v3: `rechecking`
# v4: partitions come from the columnar image: replica states in assignment order; v5: partitions
# as columns (columns.encode_columns) unless some partition does not fit them; v6: `removing_topics`;
# v7: `replicas_on_offline_dirs`
VERSIONS["PartitionStatesWritten"] = 2  # v2: `landed` and `final` (progress of a large write)
for _name in ("ReassignmentRequested", "PreferredElectionRequested", "WriteReassignmentPlan",
              "DeletePreferredElectionRequest"):
    VERSIONS[_name] = 2  # v2: the admin znode's version, read or expected (conditional writes)

UPGRADES: dict[tuple[str, int], Callable[[dict], dict]] = {
    ("ControllerState", 1): lambda d: {**d, "v": 2},  # v1 states had nothing deferred
    # v2 states re-read nothing, and their controllers followed the decision rules of version 1
    ("ControllerState", 2): lambda d: {**d, "v": 3, "config": {**d["config"], "rules": 1}},
    # v3 listed replica states in the order they were set; the layout is the same, and a v3
    # head decodes into the image, which lists them in assignment order (the replay compares
    # a head of an older version in today's encoding)
    ("ControllerState", 3): lambda d: {**d, "v": 4},
    ("ControllerState", 4): lambda d: {**d, "v": 5},  # the map layout stays readable in v5
    ("ControllerState", 5): lambda d: {**d, "v": 6},  # v5 states removed no topic (the field's default)
    ("ControllerState", 6): lambda d: {**d, "v": 7},  # v6 states knew no replica on a failed dir
    ("PartitionStatesWritten", 1): lambda d: {**d, "v": 2},  # v1 outcomes were all final
    # v1 admin-znode events and writes knew no version: -1, "any" (the field's default)
    ("ReassignmentRequested", 1): lambda d: {**d, "v": 2},
    ("PreferredElectionRequested", 1): lambda d: {**d, "v": 2},
    ("WriteReassignmentPlan", 1): lambda d: {**d, "v": 2},
    ("DeletePreferredElectionRequest", 1): lambda d: {**d, "v": 2},
}
"""(type name, version) -> function turning a body of that version into one of version + 1."""

_EVENT_SET = frozenset(EVENT_TYPES)

_EVENTS_BY_NAME = {cls.__name__: cls for cls in EVENT_TYPES}
_COMMANDS_BY_NAME = {cls.__name__: cls for cls in COMMAND_TYPES}
_STATES_BY_NAME = {cls.__name__: cls for cls in STATE_TYPES}
if len(VERSIONS) != len(EVENT_TYPES) + len(COMMAND_TYPES) + len(STATE_TYPES):
    raise TypeError("codec: two top-level types share a class name")

_SHARE_CAP = 1 << 16
"""Entries per cache of shared decoded values, after which new values are simply not shared."""
