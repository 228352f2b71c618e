"""Where a read of the failure topic ends, for every reader of it.

The high watermark is only a lower bound of a partition's end: tansu 0.6
reports the base offset of the last record batch + 1 (it said 1 for a
partition of 60 records). Quiet polls are no end either: under load a fetch
from tansu can take seconds, and a read that stopped after two quiet polls
once missed the last of 60 records. The end is the client's end-of-partition
event (``enable.partition.eof``), which librdkafka raises when a fetch at or
past the watermark comes back empty: the true end, on tansu too, as long as
it comes after the records read and at or past the watermark.

The operator's reader (:mod:`scripts.reprocess.kafka`) and the harness's
(:func:`local.failures.read_topic`) both follow :class:`PartitionEnds`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Final

# librdkafka's RD_KAFKA_RESP_ERR__PARTITION_EOF, the code of the event.
END_OF_PARTITION: Final = -191
# The consumer setting that makes librdkafka raise it.
END_OF_PARTITION_CONFIG: Final = {"enable.partition.eof": True}


@dataclass
class PartitionEnds:
    """Which partitions a read has reached the end of, as of now."""

    watermarks: Mapping[int, int]
    _at_end: set[int] = field(default_factory=set)

    def record(self, partition: int) -> None:
        """A record came: the partition's end, if it was reached, moved on."""
        self._at_end.discard(partition)

    def event(self, partition: int, offset: int, last_read: int | None) -> None:
        """An end-of-partition event at ``offset``; ``last_read`` is the offset
        of the last record read there, one below the start before any (None:
        a partition this read does not cover)."""
        past_read = last_read is not None and offset > last_read
        if past_read and offset >= self.watermarks.get(partition, 0):
            self._at_end.add(partition)

    def missing(self, partitions: Iterable[int]) -> list[int]:
        """Those of ``partitions`` whose end is not reached, in order."""
        return sorted(set(partitions) - self._at_end)

    def reached(self, partitions: Iterable[int]) -> bool:
        return not self.missing(partitions)
