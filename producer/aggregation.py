"""KPL aggregation for the local producer (``--aggregate N``), with awslabs'
own aggregator (``aws-kinesis-agg``): the records the job reads locally are
the format real KPL producers write, not our reading of it.

Every user record of one aggregate carries the aggregate's partition key. A
KPL producer only aggregates records bound for the same shard; readers built on
KCL's ``AggregatorUtil`` (the ``aws-kinesis`` connector among them) drop an
aggregate with a user record whose own key hashes outside the shard it was
read from. One key per aggregate keeps every record in its shard on real
Kinesis too (``make produce`` can target a real stream).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from aws_kinesis_agg.aggregator import RecordAggregator  # type: ignore[import-untyped]

from model.kpl import DIGEST_SIZE

# A Kinesis record holds at most 1 MiB (data + partition key), the
# aggregator's own default limit.
MAX_AGGREGATE_BYTES: Final = 1024 * 1024


def aggregate(partition_key: str, payloads: Sequence[bytes]) -> bytes:
    """``payloads`` as ONE KPL aggregate under ``partition_key``. Raises
    ValueError when they do not fit in one Kinesis record."""
    if not payloads:
        raise ValueError("an aggregate needs at least one user record")
    aggregator = RecordAggregator(max_size=MAX_AGGREGATE_BYTES)
    for payload in payloads:
        if aggregator.add_user_record(partition_key, payload) is not None:
            raise ValueError(
                f"{len(payloads)} user records do not fit in one aggregate of "
                f"{MAX_AGGREGATE_BYTES} bytes"
            )
    return bytes(aggregator.clear_and_get().get_contents()[2])


def corrupt(aggregate_bytes: bytes) -> bytes:
    """The same aggregate with its MD5 broken: what a reader must reject whole."""
    digest = aggregate_bytes[-DIGEST_SIZE:]
    return aggregate_bytes[:-DIGEST_SIZE] + bytes(b ^ 0xFF for b in digest)
