"""Helpers for the Kinesis source tests: a moto client, producers, a collector."""

# FakeKinesis mirrors boto3's keyword names (StreamName, ShardId, ...).
# ruff: noqa: N803

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from botocore.exceptions import ClientError

from job.sources.kinesis_options import ReaderOptions
from model import aws_clients
from model.config import JobConfig
from model.kinesis_ends import ShardEnd


def kinesis_client(endpoint: str) -> Any:
    limits = aws_clients.ClientLimits(connect_timeout_sec=5, read_timeout_sec=10, retries=1)
    return aws_clients.client("kinesis", limits, region="us-east-1", endpoint_url=endpoint)


def new_stream(endpoint: str, prefix: str, shards: int) -> tuple[Any, str, list[str]]:
    """A client, and a stream of its own (a unique name: the tests share one
    emulator) once it exists, with its shard ids."""
    client = kinesis_client(endpoint)
    name = f"{prefix}-{uuid.uuid4().hex[:8]}"
    client.create_stream(StreamName=name, ShardCount=shards)
    client.get_waiter("stream_exists").wait(
        StreamName=name, WaiterConfig={"Delay": 1, "MaxAttempts": 10}
    )
    return client, name, [s["ShardId"] for s in client.list_shards(StreamName=name)["Shards"]]


def put(client: Any, name: str, values: list[str]) -> None:
    """PutRecords in chunks of 500; partition keys spread records over shards."""
    for begin in range(0, len(values), 500):
        chunk = values[begin : begin + 500]
        response = client.put_records(
            StreamName=name,
            Records=[{"Data": value.encode(), "PartitionKey": value} for value in chunk],
        )
        if response.get("FailedRecordCount"):
            raise RuntimeError(f"put_records failed: {response}")


def job_config(stream: str, endpoint: str, checkpoint: str, **source: Any) -> JobConfig:
    return JobConfig.from_dict(
        {
            "instance_id": "test-us-east-1",
            "region": "us-east-1",
            "stream_name": stream,
            "database": "test_db",
            "checkpoint_location": checkpoint,
            "kinesis_endpoint_url": endpoint,
            "kafka": {"topic": "failures", "bootstrap_servers": "127.0.0.1:9"},
            "source": source,
        }
    )


@dataclass
class Collected:
    """Rows per batch id, as foreachBatch saw them."""

    batches: dict[int, list[Any]] = field(default_factory=dict)

    def sink(self, frame: Any, batch_id: int) -> None:
        self.batches[batch_id] = frame.collect()

    @property
    def rows(self) -> list[Any]:
        return [row for batch_id in sorted(self.batches) for row in self.batches[batch_id]]

    def values(self) -> list[str]:
        return [bytes(row["data"]).decode() for row in self.rows]


@contextmanager
def running(frame: Any, checkpoint: str) -> Iterator[Callable[[], Collected]]:
    """Start a foreachBatch query; yields a function that drains and returns."""
    collected = Collected()
    query = (
        frame.writeStream.foreachBatch(collected.sink)
        .option("checkpointLocation", checkpoint)
        .trigger(processingTime="0 seconds")
        .start()
    )

    def drain() -> Collected:
        query.processAllAvailable()
        return collected

    try:
        yield drain
    finally:
        query.stop()


class FakeKinesis:
    """An in-memory Kinesis with real-service semantics where moto differs:
    sequence numbers unique across the stream, a split or merge keeps the
    parents' records (moto moves or copies them into the children), a closed
    shard's last page has no NextShardIterator. Failures can be scripted per
    call; iterators can be expired; ``served`` counts how often each record
    was returned by GetRecords.

    Two moto behaviours can be switched on: ``moto_closed_iterators`` (a
    closed shard keeps returning a NextShardIterator) and ``moto_lag``
    (MillisBehindLatest 0 although records remain: moto truncates the lag to
    whole milliseconds, and records put together share one timestamp)."""

    def __init__(
        self,
        shards: int = 1,
        page_size: int = 100,
        moto_closed_iterators: bool = False,
        moto_lag: bool = False,
    ) -> None:
        self.shards: dict[str, dict[str, Any]] = {}
        self.next_sequence = 49_000_000_000
        self.generation = 0
        self.page_size = page_size
        self.moto_closed_iterators = moto_closed_iterators
        self.moto_lag = moto_lag
        self.failures: list[Exception] = []
        self.calls: Counter[str] = Counter()
        self.served: Counter[str] = Counter()
        self.probed: Counter[str] = Counter()
        self.probing = False
        for _ in range(shards):
            self.add_shard()

    def add_shard(self, parents: tuple[str, ...] = ()) -> str:
        shard_id = f"shardId-{len(self.shards):012d}"
        self.shards[shard_id] = {"records": [], "closed": False, "parents": parents}
        return shard_id

    def put(self, shard_id: str, *values: str) -> None:
        for value in values:
            self.put_bytes(shard_id, value.encode(), value)

    def put_bytes(self, shard_id: str, data: bytes, partition_key: str) -> str:
        """One record as given (e.g. a KPL aggregate); its sequence number."""
        shard = self.shards[shard_id]
        if shard["closed"]:
            raise ValueError(f"{shard_id} is closed")
        self.next_sequence += 7
        shard["records"].append(
            {
                "SequenceNumber": str(self.next_sequence),
                "Data": data,
                "PartitionKey": partition_key,
                "ApproximateArrivalTimestamp": datetime.now(UTC),
            }
        )
        return str(self.next_sequence)

    def split(self, shard_id: str) -> tuple[str, str]:
        self.shards[shard_id]["closed"] = True
        return self.add_shard((shard_id,)), self.add_shard((shard_id,))

    def merge(self, left: str, right: str) -> str:
        self.shards[left]["closed"] = True
        self.shards[right]["closed"] = True
        return self.add_shard((left, right))

    def expire_iterators(self) -> None:
        self.generation += 1

    def _maybe_fail(self, call: str) -> None:
        self.calls[call] += 1
        if self.failures:
            raise self.failures.pop(0)

    def list_shards(self, StreamName: str | None = None, NextToken: str | None = None) -> Any:
        self._maybe_fail("list_shards")
        ids = sorted(self.shards)
        begin = int(NextToken) if NextToken else 0
        page = ids[begin : begin + 2]
        shards = []
        for shard_id in page:
            shard = self.shards[shard_id]
            raw: dict[str, Any] = {"ShardId": shard_id, "SequenceNumberRange": {}}
            parents = shard["parents"]
            if parents:
                raw["ParentShardId"] = parents[0]
            if len(parents) > 1:
                raw["AdjacentParentShardId"] = parents[1]
            if shard["closed"]:
                raw["SequenceNumberRange"]["EndingSequenceNumber"] = "9" * 30
            shards.append(raw)
        response: dict[str, Any] = {"Shards": shards}
        if begin + 2 < len(ids):
            response["NextToken"] = str(begin + 2)
        return response

    def get_shard_iterator(
        self, StreamName: str, ShardId: str, ShardIteratorType: str, **kw: Any
    ) -> Any:
        self._maybe_fail("get_shard_iterator")
        records = self.shards[ShardId]["records"]
        if ShardIteratorType == "TRIM_HORIZON":
            position = 0
        elif ShardIteratorType == "LATEST":
            position = len(records)
        elif ShardIteratorType == "AFTER_SEQUENCE_NUMBER":
            after = int(kw["StartingSequenceNumber"])
            position = sum(1 for r in records if int(r["SequenceNumber"]) <= after)
        elif ShardIteratorType == "AT_TIMESTAMP":
            position = sum(1 for r in records if r["ApproximateArrivalTimestamp"] < kw["Timestamp"])
        else:
            raise ValueError(ShardIteratorType)
        return {"ShardIterator": f"{ShardId}|{position}|{self.generation}"}

    def get_records(self, ShardIterator: str, Limit: int) -> Any:
        self._maybe_fail("get_records")
        shard_id, position_text, generation = ShardIterator.split("|")
        if int(generation) != self.generation:
            raise client_error("ExpiredIteratorException")
        shard = self.shards[shard_id]
        position = int(position_text)
        records = shard["records"][position : position + min(Limit, self.page_size)]
        position += len(records)
        # The driver's probes (kinesis_python) are counted apart, so ``served``
        # says how often the tasks read each record.
        counter = self.probed if self.probing else self.served
        counter.update(str(r["PartitionKey"]) for r in records)
        at_end = position >= len(shard["records"])
        response: dict[str, Any] = {
            "Records": records,
            "MillisBehindLatest": 0 if at_end or self.moto_lag else 1000,
        }
        if not (shard["closed"] and at_end) or self.moto_closed_iterators:
            response["NextShardIterator"] = f"{shard_id}|{position}|{self.generation}"
        return response


class DriverSide:
    """``fake`` as the driver's client: its GetRecords calls are probes."""

    def __init__(self, fake: FakeKinesis) -> None:
        self.fake = fake

    def __getattr__(self, name: str) -> Any:
        return getattr(self.fake, name)

    def get_records(self, **kw: Any) -> Any:
        self.fake.probing = True
        try:
            return self.fake.get_records(**kw)
        finally:
            self.fake.probing = False


class MemoryEndStore:
    """model.kinesis_ends' contract in memory: write-once per (batch,
    shard); ``writes`` counts the attempts to record."""

    def __init__(self) -> None:
        self.ends: dict[tuple[int, str], ShardEnd] = {}
        self.writes: Counter[tuple[int, str]] = Counter()

    def put_once(self, batch: int, shard_id: str, end: ShardEnd) -> ShardEnd:
        self.writes[(batch, shard_id)] += 1
        return self.ends.setdefault((batch, shard_id), end)

    def get(self, batch: int, shard_id: str) -> ShardEnd | None:
        return self.ends.get((batch, shard_id))

    def purge_before(self, batch: int) -> None:
        self.ends = {key: end for key, end in self.ends.items() if key[0] >= batch}


def client_error(code: str) -> Exception:
    return ClientError({"Error": {"Code": code, "Message": code}}, "GetRecords")


# The enhanced fan-out tests (job.sources.kinesis_consumer, kinesis_subscription,
# kinesis_efo): a SubscribeToShard event, a clock that sleeps at once, options.


def efo_record(seq: int) -> dict[str, Any]:
    return {
        "SequenceNumber": str(seq),
        "Data": f"r{seq}".encode(),
        "PartitionKey": "k",
        "ApproximateArrivalTimestamp": datetime(2026, 1, 1, tzinfo=UTC),
    }


def efo_event(
    seqs: list[int], behind: int = 0, *, children: bool = False, cont: str | None = "x"
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "Records": [efo_record(s) for s in seqs],
        "ContinuationSequenceNumber": str(seqs[-1]) if seqs and cont else cont,
        "MillisBehindLatest": behind,
    }
    if children:
        body["ChildShards"] = [{"ShardId": "shardId-000000000001", "ParentShards": []}]
        body["ContinuationSequenceNumber"] = None
    return {"SubscribeToShardEvent": body}


EFO_OPTIONS = ReaderOptions(
    stream_name="s",
    region="us-east-1",
    max_fetch_records_per_shard=100,
    max_fetch_time_per_shard_sec=10,
    consumer_type="SubscribeToShard",
    consumer_name="c",
)
