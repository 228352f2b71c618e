"""Moving from dropDuplicatesWithinWatermark to the timer de-duplication, in-process.

A real old-style checkpoint (the old plan, ``bench.dedup.builtin_prepare``, run
by Spark on a file source) must be recognised locally and on S3, and the job
must refuse it before Spark starts (exit 2, a message naming the checkpoint,
what it holds and the fix). A new checkpoint seeded from the table must drop a
re-send of a stored id in its first batch and let a new id pass, and keep
dropping it after a restart without the seed.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import boto3
import pyarrow as pa
import pytest
from moto import mock_aws

from bench.dedup import builtin_prepare
from job.dedup_seed import read_seed
from job.driver import main
from job.micro_batch import prepare
from job.outcome import ExitCode
from job.sources.schema import SOURCE_SCHEMA
from job.table.catalog import ensure_table
from local.emulators import Endpoints
from model.checkpoint_state import (
    OLD_DEDUP_OPERATOR,
    OldCheckpointError,
    check_resumable,
    inspect_checkpoint,
)
from model.config import JobConfig
from model.record import REASON
from tests.job.job_helpers import event, job_config, raw_rows

NOW = datetime.now(UTC).replace(microsecond=0)


def _source_file(spark: Any, source: Path, index: int, rows: list[Any]) -> None:
    """One Parquet file per batch (the file source reads files, one per trigger)."""
    staging = source.parent / f"staging-{index:03d}"
    spark.createDataFrame(rows, SOURCE_SCHEMA).coalesce(1).write.parquet(str(staging))
    (file,) = staging.glob("*.parquet")
    source.mkdir(parents=True, exist_ok=True)
    file.rename(source / f"{index:03d}.parquet")


def _rows(ids: list[str], *, first_seq: int, arrival: datetime) -> list[Any]:
    naive = arrival.astimezone(UTC).replace(tzinfo=None)
    records = [event(i) for i in ids]
    return [(*r[:4], naive, *r[5:]) for r in raw_rows(records, first_seq=first_seq)]


def _run(
    spark: Any,
    source: Path,
    checkpoint: Path,
    plan: Callable[[Any], Any],
) -> list[list[dict[str, Any]]]:
    """Every new file of ``source`` through ``plan`` to the end; the rows of each batch."""
    seen: dict[int, list[dict[str, Any]]] = {}

    def collect(frame: Any, batch_id: int) -> None:
        seen[batch_id] = [r.asDict() for r in frame.collect()]

    stream = spark.readStream.schema(SOURCE_SCHEMA).option("maxFilesPerTrigger", 1)
    query = (
        plan(stream.parquet(str(source)))
        .writeStream.option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .foreachBatch(collect)
        .start()
    )
    try:
        query.awaitTermination(300)
    finally:
        query.stop()
    assert query.exception() is None, query.exception()
    return [seen[k] for k in sorted(seen)]


def _valid_ids(batches: list[list[dict[str, Any]]]) -> list[list[str]]:
    return [sorted(r["id"] for r in b if r[REASON] is None) for b in batches if b]


@pytest.fixture(scope="module")
def old_checkpoint(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A checkpoint of the old plan after two data batches."""
    root = tmp_path_factory.mktemp("old")
    config = job_config(database="old_plan", bootstrap="127.0.0.1:1")
    source = root / "source"
    _source_file(spark, source, 0, _rows(["a", "b"], first_seq=1, arrival=NOW))
    _source_file(spark, source, 1, _rows(["a", "c"], first_seq=3, arrival=NOW))
    checkpoint = root / "checkpoint"
    batches = _run(spark, source, checkpoint, lambda raw: builtin_prepare(raw, config))
    assert _valid_ids(batches) == [["a", "b"], ["c"]], "the old plan de-duplicates"
    return checkpoint


def test_the_old_operators_checkpoint_is_recognised_and_refused(old_checkpoint: Path) -> None:
    state = inspect_checkpoint(str(old_checkpoint))
    assert [(op.operator_id, op.name) for op in state.old_operators] == [("0", OLD_DEDUP_OPERATOR)]
    assert state.old_operators[0].evidence == f"{old_checkpoint}/state/0/_metadata/metadata"
    assert state.committed and 1 in state.committed_batches
    with pytest.raises(OldCheckpointError) as refused:
        check_resumable(state, "orders-eu-west-1")
    message = str(refused.value)
    where = f"checkpoint {old_checkpoint} holds de-duplication state this job cannot resume"
    assert where in message
    assert "operator 0 'dedupeWithinWatermark'" in message
    assert "make migrate-checkpoint INSTANCE=orders-eu-west-1" in message
    assert '"Moving to the timer de-duplication (from dropDuplicatesWithinWatermark)"' in message
    assert "STREAMING_STATEFUL_OPERATOR_NOT_MATCH_IN_STATE_METADATA" in message


def test_the_old_checkpoint_is_recognised_on_s3(old_checkpoint: Path) -> None:
    with mock_aws():
        s3 = boto3.client("s3", region_name="us-east-1")
        s3.create_bucket(Bucket="data")
        for path in old_checkpoint.rglob("*"):
            if path.is_file():
                key = f"checkpoints/orders/{path.relative_to(old_checkpoint)}"
                s3.put_object(Bucket="data", Key=key, Body=path.read_bytes())
        state = inspect_checkpoint("s3://data/checkpoints/orders", s3)
        assert [op.name for op in state.old_operators] == [OLD_DEDUP_OPERATOR]
        assert state.old_operators[0].evidence == (
            "s3://data/checkpoints/orders/state/0/_metadata/metadata"
        )
        assert state.committed
        # Without the operator metadata (an older checkpoint), the state schema tells it.
        s3.delete_object(Bucket="data", Key="checkpoints/orders/state/0/_metadata/metadata")
        state = inspect_checkpoint("s3://data/checkpoints/orders", s3)
        assert [op.evidence for op in state.old_operators] == [
            "s3://data/checkpoints/orders/state/0/0/_metadata/schema"
        ]
        empty = inspect_checkpoint("s3://data/checkpoints/none", s3)
        assert not empty.operators and not empty.committed


def test_the_job_refuses_the_old_checkpoint_before_spark_starts(
    old_checkpoint: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    config = job_config(database="refused", bootstrap="127.0.0.1:1", checkpoint=str(old_checkpoint))
    path = tmp_path / "job.json"
    path.write_text(json.dumps(config.to_dict()), encoding="utf-8")
    before = sorted(p.relative_to(old_checkpoint) for p in old_checkpoint.rglob("*"))
    with caplog.at_level(logging.ERROR, logger="job.driver"):
        assert main(["--config", str(path)]) == ExitCode.BAD_CONFIG
    assert f"checkpoint {old_checkpoint} holds de-duplication state this job cannot resume" in (
        caplog.text
    )
    after = sorted(p.relative_to(old_checkpoint) for p in old_checkpoint.rglob("*"))
    # Nothing but the lease and the exit record (why it refused, model/exit_record.py).
    assert [p for p in after if p not in before] == [Path("_exit"), Path("_lease")]
    assert "holds de-duplication state" in (old_checkpoint / "_exit").read_text(encoding="utf-8")


def _store(config: JobConfig, rows: list[tuple[str, datetime]]) -> Any:
    """The events table holding ``rows`` (id, arrival), as earlier batches left them."""

    table = ensure_table(config)
    schema = table.schema().as_arrow()
    columns: dict[str, Any] = {}
    for field in schema:
        if field.name == "id":
            columns[field.name] = pa.array([i for i, _ in rows], field.type)
        elif field.name in ("arrival_time", "occurred_at"):
            naive = [a.astimezone(UTC).replace(tzinfo=None) for _, a in rows]
            columns[field.name] = pa.array(naive, field.type)
        else:
            columns[field.name] = pa.nulls(len(rows), field.type)
    table.append(pa.table(columns, schema=schema))
    return table


def test_a_new_checkpoint_seeded_from_the_table_drops_stored_ids(
    spark: Any, tmp_path: Path
) -> None:
    config = job_config(database="seeded", bootstrap="127.0.0.1:1")
    table = _store(
        config,
        [
            ("a", NOW - timedelta(hours=2)),
            # Older than the horizon (24 h) but within horizon + retention: seeded.
            ("b", NOW - timedelta(hours=30)),
            # Older than horizon + retention (48 h): no readable record can repeat it.
            ("ancient", NOW - timedelta(hours=49)),
        ],
    )
    seed = read_seed(spark, table, config, now=NOW)
    assert seed is not None and seed.ids == 2, "a and b; not ancient"
    source = tmp_path / "source"
    checkpoint = tmp_path / "checkpoint"
    # Batch 0 re-sends stored ids beside new ones: 'a' now, 'b' 10 h ago (20 h
    # after its original: within the horizon, a backlog the new checkpoint
    # reads again from TRIM_HORIZON), 'ancient' now.
    batch = _rows(["a", "c", "ancient"], first_seq=1, arrival=NOW)
    batch += _rows(["b"], first_seq=4, arrival=NOW - timedelta(hours=10))
    _source_file(spark, source, 0, batch)
    first = _run(spark, source, checkpoint, lambda raw: prepare(raw, config, seed=seed.frame))
    assert _valid_ids(first) == [["ancient", "c"]]
    seed.release()
    # A restart on the committed checkpoint plans no seed; the seeded ids stay remembered.
    soon = NOW + timedelta(minutes=5)
    _source_file(spark, source, 1, _rows(["a", "d"], first_seq=5, arrival=soon))
    later = _run(spark, source, checkpoint, lambda raw: prepare(raw, config))
    assert _valid_ids(later) == [["d"]]
    assert inspect_checkpoint(str(checkpoint)).old_operators == ()


def test_an_empty_table_seeds_nothing(spark: Any) -> None:
    config = job_config(database="unseeded", bootstrap="127.0.0.1:1")
    assert read_seed(spark, ensure_table(config), config, now=NOW) is None


def test_the_seed_is_read_from_a_warehouse_on_s3(
    spark: Any, endpoints: Endpoints, tmp_path: Path
) -> None:
    """The executors reach the data files through pyiceberg's FileIO, where the
    writer put them: here moto S3 (the pyspark wheel has no S3 file system)."""
    s3 = boto3.client("s3", endpoint_url=endpoints.aws_url, region_name="us-east-1")
    s3.create_bucket(Bucket="seed-warehouse")
    config = job_config(
        database="seeded_s3",
        bootstrap="127.0.0.1:1",
        s3_endpoint_url=endpoints.aws_url,
        catalog={
            "type": "sql",
            "uri": f"sqlite:///{tmp_path / 'catalog.db'}",
            "warehouse": "s3://seed-warehouse/warehouse",
        },
    )
    table = _store(config, [("s3-a", NOW), ("s3-b", NOW - timedelta(hours=1))])
    assert table.location().startswith("s3://seed-warehouse/")
    seed = read_seed(spark, table, config, now=NOW)
    assert seed is not None
    try:
        keys = sorted(r[0] for r in seed.frame.collect())
    finally:
        seed.release()
    assert (seed.ids, keys) == (2, ["id:s3-a", "id:s3-b"])
