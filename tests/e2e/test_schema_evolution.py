"""Events that change: a field producers send before it is declared is kept
and counted; once a copy of ``cdk.json`` declares it, a redeploy through the
handover adds the column to the live table, and nothing is lost or doubled.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from job.table.catalog import load_table
from local.declare_field import write_declared_copy
from local.emulators import Emulators
from local.harness import LocalInstance, load_example_instances
from local.metrics import cloudwatch_client
from model import contract
from model.record import UNDECLARED_FIELDS
from producer.events import MixSpec, carrying, expected_ids, generate, now_utc
from scripts.status.metrics import MetricsWindow
from scripts.status.undeclared import read_undeclared_keys
from tests.e2e.conftest import MakeLocal, poll
from tests.fixtures import EXAMPLE_CDK_JSON

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]

INSTANCE = "orders-ap-northeast-2"
KEY = "channel"
COUNT = 1_000
CARRIERS = 200
ACCOUNT_SEC = 420


def _events(local: LocalInstance, prefix: str, **kw: Any) -> Any:
    spec = MixSpec(count=COUNT, malformed_share=0.0, duplicate_share=0.0, seed=34,
                   id_prefix=prefix, schema=local.schema, **kw)  # fmt: skip
    return generate(spec, now_utc())


def _key_sum(local: LocalInstance, start: datetime, end: datetime) -> float:
    """``UndeclaredKeyRecords`` of ``channel`` published in [start, end)."""
    client = cloudwatch_client(local.config.region, local.endpoints.aws_url)
    answer = client.get_metric_statistics(
        Namespace=contract.metric_namespace(local.name),
        MetricName=contract.UNDECLARED_KEY_RECORDS,
        Dimensions=contract.dimensions(local.name, key=KEY),
        StartTime=start,
        EndTime=end,
        Period=1,
        Statistics=["Sum"],
    )
    return float(sum(point["Sum"] for point in answer["Datapoints"]))


def test_an_undeclared_field_is_kept_then_declared_by_a_redeploy(
    emulators: Emulators, make_local: MakeLocal, tmp_path: Path
) -> None:
    local = make_local(emulators, INSTANCE, shards=1)
    began = datetime.now(UTC) - timedelta(seconds=5)
    local.start_job()

    first = _events(local, "before", undeclared_key=KEY, undeclared_share=CARRIERS / COUNT)
    sent_with_key = carrying(first, KEY)
    assert len(sent_with_key) == CARRIERS
    local.produce(first)
    local.wait_until_accounted(timeout=ACCOUNT_SEC)
    poll(lambda: _key_sum(local, began, datetime.now(UTC)) >= CARRIERS,
         "the undeclared-key metric of the first job", timeout=60)  # fmt: skip

    # A copy of cdk.json declares the field; the new version takes over.
    copy = write_declared_copy(
        EXAMPLE_CDK_JSON, tmp_path / "cdk.json", INSTANCE, {"name": KEY, "required": False}
    )
    (declared,) = (i for i in load_example_instances(copy) if i.instance_id == INSTANCE)
    assert declared.job.event_fields[-1].name == KEY
    local.redeploy(declared)
    redeployed = datetime.now(UTC)
    assert local.runs == 2 and local.all_jobs[0].returncode == 0, "the old job stopped first"

    second = _events(local, "after")  # the schema now declares channel: every event sends it
    assert carrying(second, KEY) == expected_ids(second)
    local.produce(second)
    local.wait_until_accounted(timeout=ACCOUNT_SEC)

    rows = local.read_table(["id", KEY, UNDECLARED_FIELDS])
    ids = [r["id"] for r in rows]
    assert len(ids) == len(set(ids)), "0 duplicated"
    assert set(ids) == expected_ids(first) | expected_ids(second), "0 lost"
    assert len(ids) == 2 * COUNT

    sent = {r.event_id: json.loads(r.data) for r in [*first, *second] if r.event_id}
    before = [r for r in rows if r["id"].startswith("before")]
    after = [r for r in rows if r["id"].startswith("after")]
    assert all(r[KEY] is None for r in before), "rows written before read the new column as null"
    kept = {r["id"]: json.loads(r[UNDECLARED_FIELDS]) for r in before if r[UNDECLARED_FIELDS]}
    assert set(kept) == sent_with_key
    assert all(kept[i] == {KEY: sent[i][KEY]} for i in kept), "held among the kept keys"
    assert all(r[KEY] == sent[r["id"]][KEY] for r in after), "later rows have the column"
    assert all(r[UNDECLARED_FIELDS] is None for r in after)

    schema = load_table(local.config).schema()
    column = schema.find_field(KEY)
    assert str(column.field_type) == "string" and not column.required
    assert schema.fields[-1].name == KEY, "appended to the live table"

    assert _key_sum(local, began, redeployed) == CARRIERS
    assert _key_sum(local, redeployed, datetime.now(UTC) + timedelta(seconds=5)) == 0
    client = cloudwatch_client(local.config.region, local.endpoints.aws_url)
    window = MetricsWindow(now=datetime.now(UTC), minutes=30, period_sec=1)
    (seen,) = read_undeclared_keys(client, local.name, window)
    assert (seen.key, seen.records) == (KEY, CARRIERS)
    assert seen.share is not None and 0 < seen.share < 1
    assert local.stop_job() == 0, local.log_tail()
