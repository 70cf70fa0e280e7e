"""The failover benchmark's client-visible end: the moment a stock Kafka client (librdkafka,
through confluent-kafka) polling metadata from a surviving broker first sees the new leaders (or,
after a controller failover, the new controller id).

The poller is a separate process (`python -m benchmarks.client_visible`), not a thread of the
benchmark: the controller under measurement runs in the benchmark's process, and
`AdminClient.list_topics()` builds a Python object per partition while holding the GIL (tens of
milliseconds at 10,000 partitions), which in a thread would stall the controller's event loop
and lengthen the very latency being measured. As a process it shares only the CPU; the CPU it
used in each run is reported (`client_cpu_ms`) so that its weight on a small machine shows.

Both processes stamp time with `time.perf_counter()`, which on Linux reads CLOCK_MONOTONIC, one
clock for the whole machine; the poller reports a reading when it starts and the benchmark
checks that it falls between its own readings around that moment, so a platform where the clocks
differ fails loudly instead of giving a wrong figure.

Line protocol (JSON, one object a line). The poller answers `{"ready": clock, ...}` once its
first metadata request succeeded. The benchmark sends `{"op": "watch", "condition": {...},
"timeout_s": T}`; the poller polls, answers `{"watching": ...}` after a poll that does not
satisfy the condition (so polling is under way at t0 and the broker's cache shows the state from
before it), then `{"seen": clock, ...}` after the first poll that does, or `{"error": ...}`.
Conditions: `{"leaders_off": B, "partitions": N}` (N partitions, none led by B or leaderless) and
`{"controller_not": B}` (a controller id other than B and -1).

Each poll is one `list_topics()` (a Metadata request for every topic) answered by the chosen
broker (see PinnedClient); after each answer the poller sleeps `--interval-ms` before the next
request, so it never polls back to back: the resolution of the figure is one poll plus the
interval, both reported.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import signal
import statistics
import sys
import time
from pathlib import Path

from adapters.sim import stock_client
from adapters.zookeeper.server import die_with_parent

DEFAULT_INTERVAL_MS = 10
MODES = ("batched", "kafka-2.4")
"""The cluster modes whose runs carry a client-visible end (the product and its peer)."""


def absent_reason() -> str | None:
    """Why the client-visible end cannot be measured here, or None."""
    if not stock_client.available():
        return "confluent-kafka is not installed (a test extra: pip install 'kctl[test]')"
    return None


# -- the benchmark's side ------------------------------------------------------------------------


class MetadataPoller:
    """The benchmark's handle on one poller process, bootstrapped at one broker."""

    def __init__(self, broker_id: int, bootstrap: str, interval_ms: float, log_path: Path):
        self.broker_id = broker_id
        self.bootstrap = bootstrap
        self.interval_ms = interval_ms
        self.log_path = log_path
        self.proc: asyncio.subprocess.Process | None = None

    async def start(self, timeout: float = 60) -> None:
        before = time.perf_counter()
        with open(self.log_path, "ab") as log:
            self.proc = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "benchmarks.client_visible", "--bootstrap", self.bootstrap,
                "--broker-id", str(self.broker_id), "--interval-ms", str(self.interval_ms),
                stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=log,
                preexec_fn=lambda: die_with_parent(signal.SIGKILL))
        ready = await self._answer(timeout, "the metadata poller to start")
        after = time.perf_counter()
        if "ready" not in ready:
            raise RuntimeError(f"the metadata poller at {self.bootstrap} did not start: {ready.get('error', ready)}")
        if not before <= ready["ready"] <= after:
            raise RuntimeError("the metadata poller's clock is not this process's (perf_counter is not "
                               "machine-wide here): the client-visible end cannot be timed")

    async def watch(self, condition: dict, timeout_s: float = 120) -> None:
        """Start polling for `condition`; returns once a first poll showed it not yet met."""
        self._send({"op": "watch", "condition": condition, "timeout_s": timeout_s})
        answer = await self._answer(60, "the metadata poller's first poll")
        if "watching" not in answer:
            raise RuntimeError(f"metadata poller at {self.bootstrap}: {answer.get('error', answer)}")

    async def seen(self, t0: float, timeout_s: float = 150) -> dict:
        """The run's client-visible figures: `client_visible_ms` from `t0` (a perf_counter
        reading), the median duration of one poll, the poller's CPU over the watch, how often the
        client had to be pinned again."""
        answer = await self._answer(timeout_s, "the metadata poller's answer")
        if "seen" not in answer:
            raise RuntimeError(f"metadata poller at {self.bootstrap}: {answer.get('error', answer)}")
        return {"client_visible_ms": (answer["seen"] - t0) * 1000, "client_poll_ms": answer["poll_ms"],
                "client_polls": answer["polls"], "client_cpu_ms": answer["cpu_ms"],
                "client_poll_interval_ms": self.interval_ms, "client_broker": self.broker_id,
                "client_repins": answer["repins"]}

    def _send(self, message: dict) -> None:
        self.proc.stdin.write((json.dumps(message) + "\n").encode())

    async def _answer(self, timeout: float, what: str) -> dict:
        try:
            line = await asyncio.wait_for(self.proc.stdout.readline(), timeout)
        except TimeoutError:
            raise TimeoutError(f"timed out after {timeout:.0f} s waiting for {what} (see {self.log_path})") from None
        if not line:
            code = await self.proc.wait()
            raise RuntimeError(f"the metadata poller exited with {code} while {what} was awaited "
                               f"(see {self.log_path})")
        return json.loads(line)

    async def close(self) -> None:
        if self.proc is None or self.proc.returncode is not None:
            return
        self.proc.stdin.close()
        try:
            await asyncio.wait_for(self.proc.wait(), 10)
        except TimeoutError:
            self.proc.kill()
            await self.proc.wait()


def summarize(samples: list[dict], unprepared: dict | None) -> dict:
    """The client-visible keys of one scenario and mode in result.json, from its runs (`seen()`
    of each): per run (`client_visible_samples_ms`) and their median, min and max; the median
    duration of one poll and the poller's median CPU per run; the broker polled and how often an
    answer came from another broker, so the client was made again (see PinnedClient)."""
    seen = [s["client_visible_ms"] for s in samples]
    out = {"client_visible_samples_ms": seen, "client_visible_median_ms": statistics.median(seen),
           "client_visible_min_ms": min(seen), "client_visible_max_ms": max(seen),
           "client_poll_ms": statistics.median(s["client_poll_ms"] for s in samples),
           "client_poll_interval_ms": samples[0]["client_poll_interval_ms"],
           "client_cpu_ms": statistics.median(s["client_cpu_ms"] for s in samples),
           "client_broker": samples[0]["client_broker"],
           "client_repins": sum(s["client_repins"] for s in samples)}
    if unprepared is not None and "client_visible_ms" in unprepared:
        out["client_visible_unprepared_ms"] = unprepared["client_visible_ms"]
    return out


# -- the poller process --------------------------------------------------------------------------


def satisfied(md, condition: dict) -> bool:
    if "controller_not" in condition:
        return md.controller_id not in (-1, condition["controller_not"])
    off = condition["leaders_off"]
    count = 0
    for topic in md.topics.values():
        for p in topic.partitions.values():
            if p.leader in (-1, off):
                return False
            count += 1
    return count == condition["partitions"]


def describe(md, condition: dict) -> str:
    """What a poll showed, for an error message."""
    if "controller_not" in condition:
        return f"controller {md.controller_id}"
    leaders = [p.leader for t in md.topics.values() for p in t.partitions.values()]
    off = condition["leaders_off"]
    return (f"{len(leaders)} partitions of {condition['partitions']}, {leaders.count(off)} led by broker {off}, "
            f"{leaders.count(-1)} leaderless")


def _reply(message: dict) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


class PinnedClient:
    """An AdminClient whose metadata requests go to one broker.

    librdkafka sends an application's metadata request to a broker of its choice among those it
    is connected to, and once it has learned the cluster's brokers it leaves the bootstrap
    connection for one of them, at random, and stays there while that connection lives. Left
    alone it would poll any broker, the controller's own process included, whose event loop is
    what the benchmark times. So the client is made again until its requests land on the
    chosen broker (`pin`), and again whenever an answer comes from another one (`repins`)."""

    ATTEMPTS = 60

    def __init__(self, bootstrap: str, broker_id: int):
        self.bootstrap = bootstrap
        self.broker_id = broker_id
        self.repins = 0
        self.client = None

    def pin(self) -> None:
        from confluent_kafka.admin import AdminClient

        landed = []
        for _ in range(self.ATTEMPTS):
            self.client = AdminClient({"bootstrap.servers": self.bootstrap, "socket.timeout.ms": 10000})
            # the first answer may come over the bootstrap connection (the chosen broker's
            # address); the next ones come from the broker librdkafka settled on
            self.client.list_topics(timeout=30)
            answered = self.client.list_topics(timeout=30).orig_broker_id
            if answered == self.broker_id:
                return
            landed.append(answered)
            self.client = None
        raise RuntimeError(f"librdkafka never settled on broker {self.broker_id} in {self.ATTEMPTS} clients "
                           f"(it chose {sorted(set(landed))})")

    def list_topics(self):
        """One metadata request for every topic, answered by the chosen broker."""
        md = self.client.list_topics(timeout=10)
        while md.orig_broker_id not in (self.broker_id, -1):  # -1: the bootstrap connection, same broker
            self.repins += 1
            self.pin()
            md = self.client.list_topics(timeout=10)
        return md


def _watch(client: PinnedClient, condition: dict, timeout_s: float, interval_s: float) -> dict:
    """Poll until a poll shows the condition not met (the state from before t0: a cache still
    catching up with the restored cluster is waited for), answer `watching`, then poll until one
    shows it met."""
    from confluent_kafka import KafkaException

    deadline = time.perf_counter() + timeout_s
    polls: list[float] = []
    last_error = last = None
    watching = False
    cpu0 = repins0 = None
    while True:
        sent = time.perf_counter()
        try:
            md = client.list_topics()
        except KafkaException as exc:  # a busy broker: the next poll may get through
            last_error, md = str(exc), None
        got = time.perf_counter()
        if md is not None:
            last = md
            met = satisfied(md, condition)
            if watching:
                polls.append(got - sent)
                if met:
                    return {"seen": got, "polls": len(polls), "poll_ms": statistics.median(polls) * 1000,
                            "cpu_ms": (time.process_time() - cpu0) * 1000, "repins": client.repins - repins0}
            elif not met:
                watching = True
                cpu0 = time.process_time()  # every thread of this process, librdkafka's included
                repins0 = client.repins
                _reply({"watching": got})
        if got > deadline:
            what = "the condition met" if watching else "the state from before t0"
            shown = describe(last, condition) if last is not None else "no answer"
            return {"error": f"{what} not seen within {timeout_s:.0f} s ({len(polls)} polls; the last showed "
                             f"{shown}; last error: {last_error})"}
        time.sleep(interval_s)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="the failover benchmark's metadata poller (see the module doc)")
    parser.add_argument("--bootstrap", required=True, help="HOST:PORT of the broker to poll")
    parser.add_argument("--broker-id", type=int, required=True, help="that broker's id")
    parser.add_argument("--interval-ms", type=float, default=DEFAULT_INTERVAL_MS)
    args = parser.parse_args(argv)
    client = PinnedClient(args.bootstrap, args.broker_id)
    try:
        client.pin()
    except Exception as exc:
        _reply({"error": f"no metadata from broker {args.broker_id} at {args.bootstrap}: {exc}"})
        return 1
    _reply({"ready": time.perf_counter(), "client": stock_client.client_version()})
    for line in sys.stdin:
        command = json.loads(line)
        if command.get("op") != "watch":
            _reply({"error": f"unknown command {command!r}"})
            continue
        _reply(_watch(client, command["condition"], command["timeout_s"], args.interval_ms / 1000))
    return 0


if __name__ == "__main__":
    sys.exit(main())
