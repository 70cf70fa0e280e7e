"""A closed ZkSession, once dropped, is freed by reference counts (issue 16's last ZooKeeper
cycle, docs/notes/issue-16-cyclic-garbage.md): the connection's session object, which aiozk's
cancelled tasks keep in a cycle of their own, lets go of the ZkSession's callbacks on close.
Measured as in tests/adapters/test_node_garbage.py: the collector off, `gc.DEBUG_SAVEALL`, and a
look at what `gc.collect()` found unreachable."""
from __future__ import annotations

import asyncio
import gc

from adapters.zookeeper.session import ZkSession
from tests.adapters.test_node_garbage import cyclic_garbage as _cyclic_garbage


async def test_a_closed_session_is_freed_without_the_cyclic_collector(zk_connect):
    was = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        zk = await ZkSession.connect(zk_connect)
        await zk.create("/x", b"1")
        await zk.close()
        await asyncio.sleep(0.2)  # the connection's last callbacks run
        _cyclic_garbage()  # what the closed connection left (not this test's subject)
        del zk
        garbage = _cyclic_garbage()
        assert not [o for o in garbage if isinstance(o, ZkSession)], [type(o).__qualname__ for o in garbage][:20]
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.collect()
        if was:
            gc.enable()
