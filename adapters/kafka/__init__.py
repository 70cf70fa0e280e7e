"""Kafka's wire protocol at each broker, so that stock Kafka clients see and manage the cluster.

`codec` encodes and decodes any version of a message from Kafka 2.4.1's JSON specs (`specs/`);
`protocol` frames requests and responses and lists the served apis; `metadata` answers Metadata
from the broker's cache; `configs` holds Kafka's config defaults for DescribeConfigs; `apis`
holds the request handlers; `listener` serves one client connection.
"""
