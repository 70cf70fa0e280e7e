"""The two ways an admin operation fails.

- `AdminError`: the request is wrong or refused (bad name, unknown broker, existing topic, a
  reassignment already running ...). Everything is checked before the first write, so the
  cluster is untouched. The CLI prints it as one `error: ...` line and exits 2.
- `ToolFailure` (and its `ControllerUnavailable`): the request was fine but could not be
  carried out (ZooKeeper or the controller unreachable, an election that failed). Exit 1.
"""
from __future__ import annotations


class AdminError(Exception):
    """Bad input or a refused request; nothing was written."""


class ToolFailure(Exception):
    """A valid request that could not be carried out."""


class ControllerUnavailable(ToolFailure):
    """No controller answered."""


class TopicConfigError(AdminError):
    pass


class UnknownTopicConfigError(TopicConfigError):
    """A topic config name Kafka's LogConfig does not know (Kafka's InvalidConfigurationException,
    where a bad value of a known name is a ConfigException)."""
