"""What operators look at: Prometheus metrics under Kafka's names, the state-change log, the decision log and the log line formats."""
