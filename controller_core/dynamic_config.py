"""Dynamic broker configuration: Kafka 2.4's UncleanLeaderElectionEnable controller event.

`BrokerDefaultConfigChanged` carries the node's dynamic `unclean.leader.election.enable`: its
own `/config/brokers/<id>`, else `/config/brokers/<default>`. It is the node's configuration,
not the term's: it is applied to `state.config` whether or not this node is the controller (so
a later term starts with it), and when it turns unclean election on while this node is the
controller, every New or Offline partition is elected at once with the offline rule (Kafka's
`partitionStateMachine.triggerOnlinePartitionStateChange()`), which may now pick an
out-of-sync replica where the topic has no override saying otherwise.

Precedence (ControllerConfig.unclean_default, ControllerState.unclean_allowed): the topic's
override, then this dynamic value (the broker's own, then the cluster default), then the node's
static setting. As in Kafka, the controller's own broker settings decide: a per-broker value on
another broker matters once that broker is the controller.
"""
from __future__ import annotations

import attrs

from . import partitions as P
from .draft import Draft
from .events import BrokerDefaultConfigChanged
from .state import ControllerState


def on_broker_default_changed(state: ControllerState, event: BrokerDefaultConfigChanged) -> tuple[ControllerState, tuple]:
    """Executed by `step()` for every node; commands only for the active controller."""
    config = attrs.evolve(state.config, dynamic_unclean_leader_election_enable=event.unclean_leader_election_enable)
    if config == state.config:
        return state, ()
    was = state.config.unclean_default()
    state = attrs.evolve(state, config=config)
    if not state.active or was or not config.unclean_default():
        return state, ()
    d = Draft(state, cause=type(event).__name__)
    P.trigger_online_state_change(d)
    return d.finish()
