"""How the failover benchmark attributes a run's time to phases (benchmarks/failover.py `_phases`),
on reports made up here with known times: no cluster, so each figure can be checked exactly."""
import pytest

from benchmarks import failover
from controller_core import commands as C
from controller_core import events as E
from controller_core.values import LeaderIsr, TopicPartition


def _write(write_id: int, partitions: int) -> C.WritePartitionStates:
    return C.WritePartitionStates(write_id=write_id, writes=tuple(
        C.PartitionWrite(TopicPartition("t", p), LeaderIsr(1, 1, (1, 2), 2, 1), 0) for p in range(partitions)))


def _timing(enqueued: float, done: float, commands=(), step_ms: float = 10.0) -> dict:
    return {"enqueued": enqueued, "queue_ms": 0.0, "journal_ms": 1.0, "step_ms": step_ms, "execute_ms": 0.0,
            "done": done, "commands": tuple(commands)}


def _probe(t0: float) -> failover.Probe:
    probe = failover.Probe()
    probe.t0 = t0  # as start() sets it, without a meter
    return probe


def _elected(at: int = 0) -> E.ControllerElected:
    return E.ControllerElected(at=at, epoch=2, epoch_zk_version=1, snapshot=None)


def test_a_write_still_in_flight_at_the_end_counts_up_to_the_end():
    """Controller failover: the end is the acknowledgement of the new controller's
    UpdateMetadata, which does not wait for the ISR shrinks its decision wrote; their write was
    reported (on_written) only once done, after the end, and the phase read 0 (the 100,000
    partition run of 2026-11-27: `zk_writes` 0 beside four PartitionStatesWritten)."""
    probe = _probe(t0=100.0)
    probe.on_event(_elected(), _timing(enqueued=100.4, done=100.5, commands=[_write(1, 5000)]))
    end = 100.8  # the last UpdateMetadata acknowledged; the write is still running
    out = failover._phases(probe, end, "ControllerElected", E.ControllerElected)
    assert out["phases_ms"]["zk_writes"] == pytest.approx(300.0)  # from the decision to the end
    assert out["zk_write_counts"] == {"reported": 0, "in_flight_at_end": 1, "partitions_in_flight_at_end": 5000}
    assert out["phases_ms"]["broker_round_trip"] == pytest.approx(300.0)


def test_a_write_reported_after_the_end_counts_up_to_the_end_only():
    probe = _probe(t0=100.0)
    probe.on_event(_elected(), _timing(enqueued=100.4, done=100.5, commands=[_write(1, 5000)]))
    probe.writes.append((101.0, 1, 5000, 0.45))  # as on_written records it: started at 100.55
    end = 100.8
    out = failover._phases(probe, end, "ControllerElected", E.ControllerElected)
    assert out["phases_ms"]["zk_writes"] == pytest.approx(250.0)
    assert out["zk_write_counts"]["in_flight_at_end"] == 0 and out["zk_write_counts"]["reported"] == 1


def test_writes_done_before_the_end_count_their_own_time():
    """Broker failure: every write is reported before the end, as before the fix; two
    concurrent writes each count."""
    probe = _probe(t0=0.0)
    probe.on_event(E.BrokersChanged(at=0, brokers=()), _timing(enqueued=0.01, done=0.1,
                                                              commands=[_write(1, 3), _write(2, 4)]))
    probe.writes += [(0.15, 1, 3, 0.05), (0.19, 2, 4, 0.08)]  # (reported at, write id, partitions, seconds)
    end = 0.7
    out = failover._phases(probe, end, "BrokersChanged", E.PartitionStatesWritten)
    assert out["phases_ms"]["zk_writes"] == pytest.approx(130.0)
    assert out["zk_write_counts"] == {"reported": 2, "in_flight_at_end": 0, "partitions_in_flight_at_end": 0}


def test_the_summary_keeps_the_median_runs_write_counts():
    samples = []
    for ms, in_flight in ((10.0, 0), (20.0, 1), (30.0, 2)):
        samples.append({"total_ms": ms, "phases_ms": {p: 1.0 for p in failover.PHASES}, "events": {},
                        "zk_write_counts": {"reported": 1, "in_flight_at_end": in_flight,
                                            "partitions_in_flight_at_end": 10 * in_flight}})
    s = failover.summarize(samples)
    assert s["zk_writes_of_median_run"] == {"reported": 1, "in_flight_at_end": 1, "partitions_in_flight_at_end": 10}


def test_events_processed_after_the_end_are_left_out_of_the_phases():
    """The runner closes a session before it computes the phases, and the controller's loop
    goes on meanwhile: the events it processed after the end (here the rest of a write's
    progress) were counted in the step and journal phases (at 10,000 partitions, 100 of the
    controller-failover step's 200 ms). Now they are reported beside them."""
    probe = _probe(t0=0.0)
    probe.on_event(_elected(), _timing(enqueued=0.1, done=0.2, step_ms=50.0, commands=[_write(1, 5000)]))
    end = 0.5
    after = E.PartitionStatesWritten(at=0, write_id=1, landed=(), final=False)
    probe.on_event(after, _timing(enqueued=0.6, done=0.7, step_ms=40.0))  # wholly after the end
    out = failover._phases(probe, end, "ControllerElected", E.ControllerElected)
    assert out["phases_ms"]["step"] == pytest.approx(50.0) and out["phases_ms"]["journal"] == pytest.approx(1.0)
    assert set(out["events"]) == {"ControllerElected"}
    assert out["after_end"] == {"events": 1, "step_ms": pytest.approx(40.0), "journal_ms": pytest.approx(1.0),
                                "queue_ms": 0.0}


def test_an_event_that_straddles_the_end_counts_its_part_before_the_end():
    """At 100,000 partitions a step runs in a thread (adapters/controller/loop.py) and the
    acknowledgements that end the run arrive meanwhile."""
    probe = _probe(t0=0.0)
    probe.on_event(_elected(), _timing(enqueued=0.1, done=0.2, step_ms=50.0))
    # laid back from done=0.9: execute 0, journal 0.899-0.9, step 0.599-0.899, queue 0.589-0.599
    timing = {**_timing(enqueued=0.589, done=0.9, step_ms=300.0), "queue_ms": 10.0}
    probe.on_event(E.PartitionStatesWritten(at=0, write_id=1, final=False), timing)
    end = 0.799
    out = failover._phases(probe, end, "ControllerElected", E.ControllerElected)
    assert out["phases_ms"]["step"] == pytest.approx(50.0 + 200.0)
    assert out["phases_ms"]["queue"] == pytest.approx(10.0)
    assert out["events"]["PartitionStatesWritten"]["count"] == 1
    assert out["after_end"]["events"] == 1 and out["after_end"]["step_ms"] == pytest.approx(100.0)
    assert out["after_end"]["journal_ms"] == pytest.approx(1.0)


class _Loop:
    class queue:
        @staticmethod
        def empty() -> bool:
            return True


class _Controller:
    loop = _Loop()


class _Cluster:
    def __init__(self, probe):
        self.probe = probe

    def controller(self):
        return _Controller()


def _lai(broker: int) -> C.SendLeaderAndIsr:
    return C.SendLeaderAndIsr(broker_id=broker, broker_epoch=1, controller_epoch=1, partitions=(), live_leaders=())


async def test_a_controlled_shutdowns_end_does_not_wait_for_the_victims_departure():
    """The victim leaves once answered, and the controller's BrokersChanged sends the survivors
    LeaderAndIsr again; the end is the acknowledgement of the shutdown's own requests (request
    and release), not of those: the runs of 2026-12-06 (night) took 247-298 or 394-668 ms
    depending on whether the departure came before the brokers' last acknowledgement."""
    survivors = (2, 3)
    probe = _probe(t0=100.0)
    probe.on_event(E.ControlledShutdownRequested(at=0, request_id=1, broker_id=1, broker_epoch=1),
                   _timing(100.01, 100.02))
    probe.on_event(E.PartitionStatesWritten(at=0, write_id=1, versions=()),
                   _timing(100.10, 100.12, commands=[_lai(b) for b in survivors]))
    probe.on_event(E.BrokersChanged(at=0, brokers=()), _timing(100.20, 100.21, commands=[_lai(b) for b in survivors]))
    probe.acks = [(100.25, 2, "LeaderAndIsr", 1.0), (100.30, 3, "LeaderAndIsr", 1.0),
                  (100.50, 2, "LeaderAndIsr", 1.0), (100.60, 3, "LeaderAndIsr", 1.0)]
    cluster = _Cluster(probe)
    end = await failover._until_acked(cluster, C.SendLeaderAndIsr, "LeaderAndIsr", survivors, lambda ctrl: True,
                                      decided_by=failover.SHUTDOWN_DECISIONS)
    assert end == 100.30
    # counting every decision since t0, as the harness did before, waits for the departure's too
    probe.t0 = 100.0
    every = await failover._until_acked(cluster, C.SendLeaderAndIsr, "LeaderAndIsr", survivors, lambda ctrl: True)
    assert every == 100.60
