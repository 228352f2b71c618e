"""Where a read of the failure topic ends: only an end-of-partition event
after the records read and at or past the watermark ends a partition, and a
record after it reopens it (tansu's watermark is a lower bound only)."""

from __future__ import annotations

from producer.topic_end import END_OF_PARTITION_CONFIG, PartitionEnds


def test_the_client_is_asked_for_end_of_partition_events() -> None:
    assert END_OF_PARTITION_CONFIG == {"enable.partition.eof": True}


def test_an_event_past_the_last_record_and_the_watermark_ends_the_partition() -> None:
    ends = PartitionEnds(watermarks={0: 60, 1: 0})
    assert ends.missing([0, 1]) == [0, 1]
    ends.event(0, offset=60, last_read=59)
    ends.event(1, offset=0, last_read=-1)  # an empty partition: start 0, nothing read
    assert ends.reached([0, 1])


def test_an_event_below_the_watermark_or_not_past_the_read_is_no_end() -> None:
    ends = PartitionEnds(watermarks={0: 60})
    ends.event(0, offset=59, last_read=58)  # below the watermark
    ends.event(0, offset=60, last_read=60)  # not past the last record read
    ends.event(0, offset=61, last_read=None)  # a partition this read does not cover
    assert ends.missing([0]) == [0] and not ends.reached([0])


def test_a_record_after_the_end_reopens_the_partition() -> None:
    ends = PartitionEnds(watermarks={0: 1, 1: 1})
    ends.event(0, offset=1, last_read=0)
    ends.event(1, offset=1, last_read=0)
    ends.record(1)
    assert ends.missing([1, 0]) == [1]
