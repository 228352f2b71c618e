"""``model.failure_record``: the headers a failed record is sent with."""

from __future__ import annotations

from model.failure_limits import HEADER_VALUE_MAX_BYTES
from model.failure_record import record_headers
from tests.model.test_claim_check import ROW


def test_header_values_are_bounded() -> None:
    headers = dict(record_headers({**ROW, "failure_message": "é" * 5_000}, "inst"))
    assert len(headers["message"]) <= HEADER_VALUE_MAX_BYTES
    headers["message"].decode("utf-8")  # never cut inside a character
