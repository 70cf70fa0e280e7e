"""The admin tools' logic (topics, reassignment, elections, throttles), as Kafka 2.4's tools write ZooKeeper."""
