"""ZooKeeper itself: the client session, connection, watches and wire codec (aiozk, patched), and the embedded server and ensemble."""
