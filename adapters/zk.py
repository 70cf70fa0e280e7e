"""Deprecated: the old path of `adapters.zookeeper.session`, kept for one release because the
README's embedding example imported `ZkSession` from here. Import from
`adapters.zookeeper.session`."""
from adapters.zookeeper.session import ZkSession  # noqa: F401

__all__ = ["ZkSession"]
