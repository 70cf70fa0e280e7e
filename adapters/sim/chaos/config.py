"""The settings of one chaos run, and its seeded random streams."""
from __future__ import annotations

import random
from pathlib import Path

import attrs

REPLAY_MODES = ("spark", "local", "none")


@attrs.frozen(kw_only=True)
class ChaosConfig:
    """`kctl chaos` flags. Every random choice of a run comes from `seed` (see `stream`)."""

    duration: float  # seconds of faults and admin work (setup, settling and replay come on top)
    seed: int
    partitions: int = 1000  # in the topics created before the chaos starts
    nodes: int = 5
    out: Path | None = None  # chaos.json, journals, logs; None: a temporary directory
    zookeeper: str | None = None  # an existing ensemble (host:port[/chroot]); None: embedded
    zookeeper_servers: int = 1  # embedded: one server, or an ensemble of this many (members faulted too)
    replay: str = "spark"  # the journals' audit: "spark" (kctl replay), "local" (replay.local), "none"
    settle_timeout: float = 180.0
    session_timeout_ms: int = 3000
    fault_interval: float = 4.0  # mean seconds between two fault starts
    admin_interval: float = 1.5  # mean seconds between two admin operations
    max_impaired: int = 2  # nodes faulted at the same time, at most
    replication_factor: int = 3

    @property
    def rf(self) -> int:
        return max(1, min(self.replication_factor, self.nodes))

    def node_settings(self) -> dict[str, str]:
        """What every node runs with: short timeouts so faults bite within a run, an automatic
        rebalance that fires during it, quick controlled-shutdown retries, and a partition size
        that makes throttled moves last a few seconds. (Each node's `log.dirs` is set by the
        fleet.)"""
        return {
            "zookeeper.session.timeout.ms": str(self.session_timeout_ms),
            "replica.lag.time.max.ms": str(max(2000, self.session_timeout_ms + 1000)),
            "replica.catch.up.delay.ms": "300",
            "auto.leader.rebalance.enable": "true",
            "leader.imbalance.check.interval.seconds": "20",
            "controlled.shutdown.max.retries": "3",
            "controlled.shutdown.retry.backoff.ms": "1000",
            # what a moving replica copies: 1 to 4 s under the workload's throttles (workload.py)
            "simulated.partition.bytes": "10000000",
        }

    def base_topics(self) -> list[tuple[str, int]]:
        """The topics created before the chaos: about 100 partitions each, `partitions` in all."""
        count = max(1, round(self.partitions / 100))
        each, extra = divmod(self.partitions, count)
        return [(f"base-{k}", each + (1 if k < extra else 0)) for k in range(count)]


def stream(seed: int, name: str) -> random.Random:
    """An independent random stream per concern ("faults", "admin"): the faults drawn do not
    depend on how many admin operations happened to run meanwhile, and the other way round."""
    return random.Random(f"kctl-chaos/{seed}/{name}")
