"""The admin tools' logic: the operations of Kafka 2.4's `kafka-topics.sh --zookeeper`,
`kafka-reassign-partitions.sh --zookeeper` and `kafka-leader-election.sh`, and the `kctl
cluster` summary, as async functions on a `ZkSession`. They write the znodes Kafka's tools write
(CONTRACT.md section 1) and nothing else; the controller does the rest. `adapters/cli/admin.py`
turns them into `kctl` commands; embedding services call them as `adapters.admin.create_topic`
and so on.

- errors.py: `AdminError` (bad or refused request, nothing written) and `ToolFailure`;
- checks.py: input checks made before the first write;
- cluster_state.py: the one reader of brokers, assignments, partition states and configs;
- topics.py, reassign.py, elect.py: the three tools; throttle.py: the replication throttle;
  configs.py: `kafka-configs.sh --alter` (`from adapters.admin import configs`).
"""
from adapters.admin.errors import AdminError, ControllerUnavailable, ToolFailure, TopicConfigError
from adapters.admin.checks import (
    TOPIC_CONFIGS,
    parse_replica_assignment,
    parse_topic_configs,
    random_seed,
    topic_pattern,
    validate_topic_configs,
    validate_topic_name,
)
from adapters.admin.cluster_state import cluster_summary, live_brokers
from adapters.admin.topics import (
    INTERNAL_TOPICS,
    add_partitions,
    alter_topic_configs,
    create_topic,
    delete_topics,
    describe_topics,
    list_topics,
)
from adapters.admin.reassign import (
    REASSIGNMENT_COMPLETED,
    REASSIGNMENT_FAILED,
    REASSIGNMENT_IN_PROGRESS,
    change_reassignment_throttle,
    execute_reassignment,
    generate_reassignment,
    parse_broker_list,
    reassignment_running,
    remove_reassignment_throttle,
    verify_reassignment,
)
from adapters.admin.elect import ELECTION_NOT_NEEDED, controller_request, elect_leaders

__all__ = [
    "AdminError",
    "ToolFailure",
    "ControllerUnavailable",
    "TopicConfigError",
    "validate_topic_name",
    "parse_replica_assignment",
    "parse_topic_configs",
    "validate_topic_configs",
    "topic_pattern",
    "random_seed",
    "parse_broker_list",
    "controller_request",
    "TOPIC_CONFIGS",
    "ELECTION_NOT_NEEDED",
    "live_brokers",
    "create_topic",
    "add_partitions",
    "alter_topic_configs",
    "delete_topics",
    "describe_topics",
    "list_topics",
    "generate_reassignment",
    "execute_reassignment",
    "verify_reassignment",
    "reassignment_running",
    "change_reassignment_throttle",
    "remove_reassignment_throttle",
    "elect_leaders",
    "cluster_summary",
    "REASSIGNMENT_COMPLETED",
    "REASSIGNMENT_IN_PROGRESS",
    "REASSIGNMENT_FAILED",
    "INTERNAL_TOPICS",
]
