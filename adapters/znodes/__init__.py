"""The Kafka 2.4 ZooKeeper layout: every path, the codec of every znode, and the dynamic-config znodes both sides use."""
