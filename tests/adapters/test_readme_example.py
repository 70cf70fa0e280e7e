"""The README's "Embedding a node in a service" example, run as written against a real
ZooKeeper: only the connect string, the journal directory and the service's own `serve` are
supplied by the test."""
from __future__ import annotations

import re
from pathlib import Path

from adapters import zkdata, zkpaths
from adapters.cluster import wait_for
from adapters.zk import ZkSession
from controller_core.values import ReplicaAssignment, TopicPartition

README = Path(__file__).resolve().parents[2] / "README.md"


async def _now(value):
    return value


def example() -> str:
    text = README.read_text()
    section = text[text.index("### Embedding a node in a service"):]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def test_the_example_is_the_one_in_the_readme():
    code = example()
    assert "asyncio.run(main())" in code and "replica_manager=replicas" in code


async def test_the_readme_example_runs_a_node_that_leads_a_new_topic(zk_connect, tmp_path):
    code = example()
    code = code.replace('"127.0.0.1:2181/prod"', repr(zk_connect)).replace('"/var/lib/kctl/1"', repr(str(tmp_path)))
    code = code.replace("asyncio.run(main())", "")
    seen = {}

    async def serve(node, replicas):
        await wait_for(lambda: _now(node.active), what="the node to become the controller")
        admin = await ZkSession.connect(zk_connect)
        try:
            await admin.create(zkpaths.topic("orders"), zkdata.encode_topic_assignment({0: ReplicaAssignment((1,))}))
            await wait_for(lambda: _now(TopicPartition("orders", 0) in replicas.leading), what="orders-0 led here")
        finally:
            await admin.close()
        seen.update(replicas.leading)

    namespace = {"serve": serve, "__name__": "readme_example"}
    exec(compile(code, str(README), "exec"), namespace)
    await namespace["main"]()
    assert seen == {TopicPartition("orders", 0): 0}
