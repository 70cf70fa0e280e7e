"""The body of a request whose partitions the controller gathered as columns decodes, at the
broker, to exactly the partitions the per-partition encoding carries."""
from __future__ import annotations

from hypothesis import given, settings

from adapters.control.requests import decode_views, states_json, views_body
from controller_core.request_batch import _requests_from_columns
from controller_core.partition_views import PartitionViews
from tests.core.test_partition_views import _requests, releases


@settings(max_examples=60, deadline=None)
@given(releases())
def test_a_columnar_body_decodes_to_the_partitions_of_the_per_partition_body(release):
    for c in _requests(_requests_from_columns, *release):
        assert isinstance(c.partitions, PartitionViews)
        fast, slow = views_body(c.partitions), views_body(tuple(c.partitions))
        assert decode_views(fast) == decode_views(slow)
        assert sorted(decode_views(fast)) == sorted(c.partitions)
        assert states_json(c.partitions)  # orjson takes it: plain ints and lists only
