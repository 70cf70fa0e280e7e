"""Deprecated: the old path of `adapters.broker.replica_manager`, kept for one release because
the README's embedding example imported `ReplicaManagerBase` from here. Import from
`adapters.broker.replica_manager`."""
from adapters.broker.replica_manager import PartitionView, ReplicaManagerBase  # noqa: F401

__all__ = ["ReplicaManagerBase", "PartitionView"]
