"""The crash loop on the serverless launch path (issue 40): the same SIGKILLs
at the same two moments as tests/e2e/test_crash_loop.py, repeated after each
recovery, but every run of the job is launched as the instance's EMR
Serverless job run would be (local/serverless_launch.py: the StartJobRun
request's entry point, arguments and spark-submit parameters, the
application's spark-defaults, the dependency archive, by spark-submit). Few
records, to keep CI time low: 0 duplicates, 0 missing ids, 0 missing
failure records."""

from __future__ import annotations

from typing import Any, Final

import pytest

from local.emulators import Emulators
from local.serverless_launch import is_serverless
from tests.e2e.conftest import MakeLocal, mix
from tests.e2e.test_crash_loop import crash_and_drain

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(1500)]

RECORDS: Final = 2_000
SLICES: Final = 4
MAX_KILLS: Final = 8
SERVERLESS_INSTANCE: Final = "orders-eu-west-1"


def test_serverless_crash_loop_loses_and_duplicates_nothing(
    emulators: Emulators,
    make_local: MakeLocal,
    instances: dict[str, Any],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The e2e example's copy of the instance, on "compute": "serverless" (as cdk.json has it).
    serverless = instances[SERVERLESS_INSTANCE].model_copy(update={"compute": "serverless"})
    monkeypatch.setitem(instances, SERVERLESS_INSTANCE, serverless)
    local = make_local(
        emulators,
        SERVERLESS_INSTANCE,
        overrides={"source": {"max_fetch_records_per_shard": 200}},
    )
    assert is_serverless(local.instance)
    records = mix(RECORDS, seed=31, prefix="sls", malformed_share=0.02, duplicate_share=0.05)
    kills, summary = crash_and_drain(
        local, records, SLICES, MAX_KILLS, label="serverless crash loop"
    )
    assert len(local.produced) == RECORDS
    assert summary.rows == RECORDS - 40 - 100  # 2 % malformed, 5 % re-sent
    assert summary.failure_records == 40
    assert kills.total >= 4
    # Every run went through the job run's spark-submit, told --platform serverless.
    log = local.log_path.read_text(encoding="utf-8", errors="replace")
    assert log.count("target serverless: spark-submit of StartJobRun STREAMING") == local.runs
    assert "--platform serverless" in log and "pyspark/bin/spark-submit" in log
