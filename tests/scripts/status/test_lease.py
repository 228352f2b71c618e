"""scripts.status.lease: whether the job runs, from its lease (an S3 lease by its
expiry; the file lease with a real process holding it: tests/scripts/test_stop.py)."""

from __future__ import annotations

import json

from scripts.status.lease import s3_lease_state


def test_s3_lease_expiry_decides() -> None:
    body = json.dumps({"owner": "ip-10-0-0-1:77", "expires_at": 1000.0}).encode()
    assert s3_lease_state("s3://b/k", body, now=999.0).running
    assert not s3_lease_state("s3://b/k", body, now=1000.0).running
    assert not s3_lease_state("s3://b/k", None, now=0).running
    assert not s3_lease_state("s3://b/k", b"not json", now=0).running
