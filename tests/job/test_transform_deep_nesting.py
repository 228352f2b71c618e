"""JSON nested 100,000 levels deep: routed to the failure topic as
``malformed_json``, one output row per input row, with no stack overflow in
the parser and no effect on the valid record beside it (job.transform.classify).

Why it matters: a record is attacker-shaped input. A recursive parser meets
deep nesting with a StackOverflowError, which in Spark fails the task, then
the batch, and the job stops on one record. Spark's JSON parsing (Jackson,
whose StreamReadConstraints limit nesting depth) refuses it instead, and
``try_parse_json`` turns the refusal into a null: a malformed record. Measured
with pyspark 4.1.1: 1,000 levels parse (999 objects around ``{}``), 1,001 do
not; ``parse_json`` reports ``MALFORMED_RECORD_IN_PARSING`` for them.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from job.transform import classify
from model.record import MALFORMED_JSON, REASON
from tests.job.job_helpers import event, raw_frame

DEPTH = 100_000
# Large enough that the size check (too_large) does not decide first.
MAX_RECORD_BYTES = 8 * DEPTH + 1_024


def _nested_payload(depth: int) -> bytes:
    """A valid event whose payload is ``depth`` nested arrays."""
    valid = json.loads(event("deep"))
    text = json.dumps(valid, separators=(",", ":"))
    head, tail = text.rsplit('"payload":', 1)
    assert tail == '{"n":1}}'
    return (head + '"payload":' + "[" * depth + "]" * depth + "}").encode()


def _nested_objects(depth: int) -> bytes:
    """An object ``depth`` levels deep: ``{"a":{"a":...{}...}}``."""
    return ('{"a":' * depth + "{}" + "}" * depth).encode()


@pytest.mark.parametrize(
    "record",
    [_nested_payload(DEPTH), _nested_objects(DEPTH)],
    ids=["event-with-deep-payload", "deep-object"],
)
def test_a_100000_level_record_is_malformed_json_and_its_neighbour_is_valid(
    spark: Any, record: bytes
) -> None:
    assert len(record) <= MAX_RECORD_BYTES
    frame = classify(raw_frame(spark, [record, event("ok")]), max_record_bytes=MAX_RECORD_BYTES)
    rows = frame.orderBy(frame["sequenceNumber"].cast("int")).collect()
    assert len(rows) == 2  # nothing dropped
    assert rows[0][REASON] == MALFORMED_JSON
    assert rows[1][REASON] is None
