"""Controlled shutdown (ControlledShutdownRequested): leadership moves away, the reply waits for
the writes, stale and misdirected requests."""
from controller_core import commands as C
from controller_core import events as E
from controller_core.step import step
from controller_core.values import LeaderIsr

from .builders import AT, elected, leader_isr, of_type, settle


def test_controlled_shutdown_moves_leadership_and_replies_once_written():
    given = elected(topics={"t": [[1, 2, 3], [2, 1, 3]], "single": [[1]]})[0]
    state, commands = step(given, E.ControlledShutdownRequested(at=AT, request_id=5, broker_id=1, broker_epoch=101))
    assert not of_type(commands, C.ReplyControlledShutdown)  # waits for the writes
    state, released = settle(state, commands)
    reply = of_type(released, C.ReplyControlledShutdown)[0]
    assert reply == C.ReplyControlledShutdown(request_id=5, broker_id=1, error=None, partitions_remaining=())
    assert leader_isr(state, "t", 0) == LeaderIsr(2, 1, (2, 3), 2, 1)
    assert leader_isr(state, "t", 1).isr == (2, 3)  # follower left the ISR
    assert leader_isr(state, "single", 0).leader == 1  # unreplicated partitions stay
    assert (1, False) in [(c.broker_id, c.delete) for c in of_type(released, C.SendStopReplica)]
    assert 1 in state.shutting_down


def test_controlled_shutdown_with_a_stale_broker_epoch_is_refused():
    given = elected(topics={"t": [[1, 2]]})[0]
    state, commands = step(given, E.ControlledShutdownRequested(at=AT, request_id=5, broker_id=1, broker_epoch=3))
    assert state == given
    assert of_type(commands, C.ReplyControlledShutdown)[0].error.startswith("STALE_BROKER_EPOCH")


def test_controlled_shutdown_on_a_non_controller_says_so():
    given = elected(topics={"t": [[1, 2]]})[0]
    inactive, _ = step(given, E.ControllerResigned(at=AT, reason="moved"))
    state, commands = step(inactive, E.ControlledShutdownRequested(at=AT, request_id=5, broker_id=1, broker_epoch=101))
    assert state == inactive and commands[0].error.startswith("NOT_CONTROLLER")
