"""scripts.status.optimizers: the Glue table optimizers' states, read in one
call on AWS, not available locally, and shown in the report."""

from __future__ import annotations

import dataclasses
import json
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError

from local.harness import replace_fields
from model import contract
from scripts.status import __main__ as status
from scripts.status.optimizers import (
    Optimizers,
    not_available_locally,
    optimizer_states,
    read_optimizers,
)
from scripts.status.report import format_report, to_json
from scripts.status.target import Target, resolve
from tests.scripts.local_runs import (
    INSTANCE,
    NOW,
    REGION,
    make_stream,
    shards_offset,
    write_batch,
    write_local_run,
)

# ------------------------------------------------------------------ table optimizers


def _optimizer(kind: str, enabled: bool, run: dict[str, Any] | None = None) -> dict[str, Any]:
    optimizer: dict[str, Any] = {
        "type": kind,
        "configuration": {"roleArn": "r", "enabled": enabled},
    }
    if run is not None:
        optimizer["lastRun"] = run
    return {"catalogId": "123456789012", "databaseName": "db", "tableName": "events",
            "tableOptimizer": optimizer}  # fmt: skip


KST = timezone(timedelta(hours=9))
SUSPENDED = {
    "TableOptimizers": [
        _optimizer(
            "compaction",
            False,
            {
                "eventType": "failed",
                # botocore gives local time; the report is in UTC
                "startTimestamp": datetime(2026, 11, 21, 20, 0, tzinfo=KST),
                "endTimestamp": datetime(2026, 11, 21, 20, 4, tzinfo=KST),
                "error": "Access Denied (Service: S3, Status Code: 403)",
            },
        ),
        _optimizer(
            "retention",
            True,
            {
                "eventType": "completed",
                "startTimestamp": NOW - timedelta(hours=2),
                "endTimestamp": NOW - timedelta(hours=1),
            },
        ),
    ],
    "Failures": [
        {
            "type": "orphan_file_deletion",
            "error": {"ErrorCode": "EntityNotFoundException", "ErrorMessage": "no optimizer"},
        }
    ],
}


def test_optimizer_states_flag_disabled_failed_and_missing() -> None:
    compaction, retention, orphans = optimizer_states(SUSPENDED)
    assert compaction.enabled is False and compaction.last_run is not None
    assert compaction.last_run.started == datetime(2026, 11, 21, 11, 0, tzinfo=UTC)
    assert compaction.flags == ["disabled", "last run failed"]
    assert retention.flags == [] and retention.last_run is not None
    assert retention.last_run.status == "completed"
    assert not orphans.found and orphans.flags == ["missing"]
    assert orphans.problem == "EntityNotFoundException: no optimizer"
    # An optimizer neither returned nor failed is missing too; one never run is fine.
    fresh = optimizer_states({"TableOptimizers": [_optimizer("compaction", True)]})
    assert [s.flags for s in fresh] == [[], ["missing"], ["missing"]]
    assert fresh[0].last_run is None


def test_optimizers_are_read_in_one_call_and_a_refusal_is_reported() -> None:
    calls: list[dict[str, Any]] = []

    class Glue:
        def batch_get_table_optimizer(self, **kwargs: Any) -> dict[str, Any]:
            calls.append(kwargs)
            return SUSPENDED

    found = read_optimizers(Glue(), "db", "events")
    assert found.available and [s.type for s in found.flagged] == [
        "compaction",
        "orphan_file_deletion",
    ]
    assert calls == [
        {"Entries": [{"databaseName": "db", "tableName": "events", "type": t}
                     for t in ("compaction", "retention", "orphan_file_deletion")]}
    ]  # fmt: skip

    class Refusing:
        def batch_get_table_optimizer(self, **_kwargs: Any) -> dict[str, Any]:
            error = {"Code": "AccessDeniedException", "Message": "not authorized"}
            raise ClientError({"Error": error}, "BatchGetTableOptimizer")

    refused = read_optimizers(Refusing(), "db", "events")
    assert not refused.available and refused.states == []
    assert "BatchGetTableOptimizer failed: An error occurred (AccessDeniedException)" in (
        refused.note
    )
    assert refused.note.endswith("(needs glue:BatchGetTableOptimizer)")


def test_optimizers_are_read_on_aws_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = write_local_run(tmp_path)
    local = resolve(INSTANCE, work_dir=tmp_path)
    assert status.table_optimizers(local) == not_available_locally()
    asked: list[str] = []

    class Glue:
        def batch_get_table_optimizer(self, **kwargs: Any) -> dict[str, Any]:
            asked.extend(e["databaseName"] + "." + e["tableName"] for e in kwargs["Entries"])
            return SUSPENDED

    def client(_self: Target, service: str, *_args: Any) -> Any:
        assert service == "glue"
        return Glue()

    monkeypatch.setattr(Target, "client", client)
    on_aws = Target(
        replace_fields(config, {"catalog": {"type": "glue"}}), "s3://a/job-config.json",
        contract.stack_name("orders", REGION), local=False,
    )  # fmt: skip
    found = status.table_optimizers(on_aws)
    assert found.available and len(found.states) == 3
    assert asked == [f"{config.database}.{contract.EVENTS_TABLE}"] * 3
    # A deployed config whose catalog is not Glue has no optimizers either.
    sql = Target(config, "x", "s", local=False)
    assert status.table_optimizers(sql) == not_available_locally()


def test_the_report_shows_and_flags_each_optimizer(tmp_path: Path, aws: None) -> None:
    config = write_local_run(tmp_path)
    make_stream(shards=1)
    write_batch(Path(config.checkpoint_location), 0, shards_offset(s0=None))
    target = resolve(INSTANCE, work_dir=tmp_path)
    args = status.parser().parse_args(["--instance", INSTANCE])
    local = status.collect(target, args, lambda: NOW)
    table = f"{config.database}.{config.table}"
    assert format_report(local).endswith(
        f"table optimizers (Glue, {table}): not available locally (the local run's catalog "
        "is SQLite; Glue table optimizers exist on AWS only)"
    )
    flagged = Optimizers(True, states=optimizer_states(SUSPENDED))
    report = dataclasses.replace(local, optimizers=flagged)
    text = format_report(report).split("\n\n")[-1].splitlines()
    assert text[:5] == [
        f"table optimizers (Glue, {table})",
        "  optimizer             enabled   last run               started                 ended"
        "                      state",
        "  compaction                 NO     failed  2026-11-21 11:00:00Z  2026-11-21 11:04:00Z"
        "  DISABLED, LAST RUN FAILED",
        "  retention                 yes  completed  2026-11-21 10:00:00Z  2026-11-21 11:00:00Z"
        "                         ok",
        "  orphan_file_deletion        -          -                     -                     -"
        "                    MISSING",
    ]
    rest = "\n".join(text[5:])
    assert "compaction: last error: Access Denied (Service: S3, Status Code: 403)" in rest
    assert "compaction disabled: Glue suspends an optimizer after repeated failed runs" in rest
    assert "orphan_file_deletion: EntityNotFoundException: no optimizer" in rest
    assert "orphan_file_deletion missing: the stack creates it" in rest
    raw = json.loads(to_json(report))["optimizers"]
    assert raw["available"] is True
    assert [s["flags"] for s in raw["states"]] == [
        ["disabled", "last run failed"],
        [],
        ["missing"],
    ]
    assert raw["states"][0]["last_run"]["started"] == "2026-11-21T11:00:00+00:00"
