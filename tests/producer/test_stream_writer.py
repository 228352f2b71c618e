"""producer.stream_writer: the entries a run puts (plain, or packed into KPL
aggregates) and the flags it refuses. (The packing's members, the pacing and
the report against a stream: tests/e2e/test_local_tools.py,
tests/scripts/test_produce.py.)"""

from __future__ import annotations

import pytest

from model.kpl import deaggregate
from producer.events import SampleRecord
from producer.stream_writer import plan_entries


def _records(n: int) -> list[SampleRecord]:
    return [SampleRecord("valid", f"r{i}".encode(), f"pk-{i}") for i in range(n)]


def test_without_aggregation_each_record_is_one_entry_in_order() -> None:
    entries = plan_entries(_records(3))
    assert [e.data for e in entries] == [b"r0", b"r1", b"r2"]
    assert [e.source.aggregated for e in entries] == [False, False, False]


def test_a_packed_group_carries_its_records_under_the_first_ones_key() -> None:
    (entry,) = plan_entries(_records(3), aggregate_size=3)
    assert entry.source.aggregated and len(entry.source.members) == 3
    assert entry.partition_key == "pk-0"
    assert [record.data for record in deaggregate(entry.data)] == [b"r0", b"r1", b"r2"]


@pytest.mark.parametrize(
    ("size", "share", "message"),
    [(-1, 1.0, "aggregate=-1: must be >= 0"), (2, 1.5, "aggregate_share=1.5: must be between")],
)
def test_bad_aggregation_flags_name_the_flag_and_the_value(
    size: int, share: float, message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        plan_entries(_records(1), aggregate_size=size, share=share)
