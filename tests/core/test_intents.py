"""The intents, strategies and timer names are enums whose members are the strings journals
hold: a state decoded from a journal (plain strings) decides exactly as the one in memory."""
import json

import pytest

from controller_core import codec
from controller_core import commands as C
from controller_core import events as E
from controller_core.intents import Strategy, Timer, WriteIntent
from controller_core.outcomes import _reapply
from controller_core.state import ControllerConfig
from controller_core.draft import Draft
from controller_core.step import step
from controller_core.values import LeaderIsr

from .builders import AT, elected, of_type, tp
from .flows import brokers_changed


def _parked_write():
    given = elected(topics={"t": [[1, 2, 3]], "u": [[2, 1, 3]]})[0]
    state, commands = step(given, brokers_changed(2, 3))  # 1 failed: t-0 re-elected, u-0 shrunk
    return state, of_type(commands, C.WritePartitionStates)[0]


def test_a_parked_outbox_holds_enum_intents_that_encode_to_the_journals_strings():
    state, write = _parked_write()
    (outbox,) = state.pending.values()
    assert dict(outbox.intents) == {tp("t", 0): ((WriteIntent.ELECT, Strategy.OFFLINE),),
                                    tp("u", 0): ((WriteIntent.SHRINK, 1),)}
    text = json.dumps(codec.encode_state(state))
    assert '["elect","offline"]' in text.replace(" ", "") and '["shrink",1]' in text.replace(" ", "")
    decoded = codec.decode_state(json.loads(text))
    (plain,) = decoded.pending.values()
    kinds = {type(i[0]) for intents in plain.intents.values() for i in intents}
    assert kinds == {str}  # the decoder makes plain strings, as an old journal's snapshot holds
    assert decoded == state


@pytest.mark.parametrize("victim", ["t", "u"])
def test_a_conflict_re_decided_from_a_decoded_snapshot_gives_the_same_commands(victim):
    state, write = _parked_write()
    decoded = codec.decode_state(json.loads(json.dumps(codec.encode_state(state))))
    fresh = LeaderIsr(1 if victim == "t" else 2, 0, (1, 2, 3) if victim == "u" else (1, 3), 1, 1)
    outcome = E.PartitionStatesWritten(at=AT, write_id=write.write_id, conflicts=((tp(victim, 0), fresh),))
    after, commands = step(state, outcome)
    after_decoded, commands_decoded = step(decoded, outcome)
    assert of_type(commands, C.WritePartitionStates)  # the conflict was re-decided, not dropped
    assert commands_decoded == commands
    assert codec.reference_digest(commands_decoded) == codec.reference_digest(commands)
    assert after_decoded == after


def test_an_unknown_intent_is_refused_by_name():
    state, _ = _parked_write()
    with pytest.raises(ValueError, match=r"unknown write intent \('grow', 3\)"):
        _reapply(Draft(state, "test"), tp("t", 0), ("grow", 3))


def test_the_timer_event_of_an_old_journal_still_runs_the_rebalance():
    config = ControllerConfig(broker_id=1, auto_leader_rebalance_enable=True)
    state = elected(topics={"t": [[1, 2, 3]]}, config=config)[0]
    _, commands = step(state, E.TimerFired(at=AT, name="auto-leader-rebalance"))
    assert [c for c in commands if isinstance(c, C.ScheduleTimer)] == [C.ScheduleTimer(name=Timer.REBALANCE, delay_ms=300_000)]
    _, ignored = step(state, E.TimerFired(at=AT, name="no-such-timer"))
    assert not ignored
