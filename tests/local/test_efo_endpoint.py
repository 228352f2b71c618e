"""local.efo_endpoint: against moto, SubscribeToShard read by a real boto3 client
and by the job's EfoShardReader (its encoding: tests/local/test_event_stream.py)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError

from job.sources import kinesis_efo
from job.sources.kinesis_consumer import ensure_consumer
from job.sources.kinesis_efo import EfoShardReader
from job.sources.kinesis_fetch import make_client
from job.sources.kinesis_options import parse_options
from job.sources.kinesis_rows import records_to_batch
from local.efo_endpoint import EfoEndpoint, Timing, read_stats
from local.emulators import Endpoints
from local.harness import build_job_config, load_example_instances, register_stack_consumer
from local.summary import RunFigures, source_line, summarize
from model.kinesis_offsets import ShardInfo, ShardState
from producer.aggregation import aggregate
from tests.fixtures import EXAMPLE_CDK_JSON
from tests.waits import poll

# ---------------------------------------------------------------- against moto


@pytest.fixture
def front(endpoints: Endpoints) -> Iterator[EfoEndpoint]:
    with EfoEndpoint(endpoints.aws_url, timing=Timing(poll_sec=0.01)) as running:
        yield running
    kinesis_efo.close_subscriptions()


def options_for(url: str, stream: str, **more: str) -> Any:
    return parse_options(
        {
            "kinesis.streamName": stream,
            "kinesis.region": "us-east-1",
            "kinesis.endpointUrl": url,
            "kinesis.consumerType": "SubscribeToShard",
            "kinesis.consumerName": "job",
            "kinesis.maxFetchTimePerShardSec": "10",
            # Required by the source; EfoShardReader alone records no ends.
            "kinesis.metadataPath": "unused",
            **more,
        }
    )


def new_stream(url: str, shards: int = 1) -> tuple[Any, Any, str]:
    """A stream of its own through the front, its consumer and the client."""
    name = f"efo-{uuid.uuid4().hex[:8]}"
    options = options_for(url, name)
    client = make_client(options)
    client.create_stream(StreamName=name, ShardCount=shards)
    client.get_waiter("stream_exists").wait(
        StreamName=name, WaiterConfig={"Delay": 1, "MaxAttempts": 10}
    )
    return client, options, ensure_consumer(client, options)


def shard_ids(client: Any, stream: str) -> list[ShardInfo]:
    return [ShardInfo.from_api(s) for s in client.list_shards(StreamName=stream)["Shards"]]


def test_boto3_reads_the_subscription_as_an_event_stream(front: EfoEndpoint) -> None:
    client, options, consumer = new_stream(front.url)
    client.put_record(StreamName=options.stream_name, Data=b"hello", PartitionKey="k")
    shard = shard_ids(client, options.stream_name)[0]
    response = client.subscribe_to_shard(
        ConsumerARN=consumer, ShardId=shard.shard_id, StartingPosition={"Type": "TRIM_HORIZON"}
    )
    stream = response["EventStream"]
    try:
        first = next(iter(stream))["SubscribeToShardEvent"]
    finally:
        stream.close()
    assert [r["Data"] for r in first["Records"]] == [b"hello"]
    assert first["ContinuationSequenceNumber"] == first["Records"][0]["SequenceNumber"]
    assert first["MillisBehindLatest"] == 0


def test_reader_reads_plain_records_and_a_kpl_aggregate(front: EfoEndpoint) -> None:
    client, options, consumer = new_stream(front.url)
    stream = options.stream_name
    client.put_record(StreamName=stream, Data=b"plain-1", PartitionKey="a")
    client.put_record(
        StreamName=stream,
        Data=aggregate("agg", [b"user-1", b"user-2", b"user-3"]),
        PartitionKey="agg",
    )
    client.put_record(StreamName=stream, Data=b"plain-2", PartitionKey="b")
    shard = shard_ids(client, stream)[0]
    reader = EfoShardReader(client, options, consumer)
    batch = reader.next_batch(shard, ShardState())
    assert len(batch.records) == 3
    assert batch.state == ShardState(after=batch.records[-1]["SequenceNumber"])
    rows = records_to_batch(stream, shard.shard_id, batch.records).to_pylist()
    assert [r["data"] for r in rows] == [b"plain-1", b"user-1", b"user-2", b"user-3", b"plain-2"]
    assert [r["subSequenceNumber"] for r in rows][1:4] == [0, 1, 2]
    # Nothing new: the next batch continues the open subscription and ends once
    # caught up, well before the fetch time (10 s) a fresh subscription may wait.
    started = time.monotonic()
    empty = reader.next_batch(shard, batch.state)
    assert empty.records == [] and empty.state == batch.state
    assert time.monotonic() - started < options.max_fetch_time_per_shard_sec / 2
    assert front.subscriptions.served == 1


def test_a_split_parent_ends_with_child_shards(front: EfoEndpoint) -> None:
    client, options, consumer = new_stream(front.url)
    stream = options.stream_name
    for i in range(3):
        client.put_record(StreamName=stream, Data=f"before-{i}".encode(), PartitionKey=f"k{i}")
    parent = shard_ids(client, stream)[0]
    client.split_shard(
        StreamName=stream, ShardToSplit=parent.shard_id, NewStartingHashKey=str(2**127)
    )
    client.put_record(StreamName=stream, Data=b"after", PartitionKey="k9")
    shards = shard_ids(client, stream)
    reader = EfoShardReader(client, options, consumer)
    # The records may come in events of their own, caught up, before the event
    # with ChildShards (the endpoint's poll races the reader, the more so on a
    # loaded machine): read batch after batch until the parent is done.
    read: list[bytes] = []
    states = [ShardState()]

    def parent_done() -> bool:
        batch = reader.next_batch(parent, states[-1])
        read.extend(r["Data"] for r in batch.records)
        states.append(batch.state)
        return batch.state.done

    poll(parent_done, lambda: f"the split parent's end (read {states})", timeout=60, interval=0.05)
    assert read == [b"before-0", b"before-1", b"before-2"]
    assert states[-1].done is True
    children = [s for s in shards if parent.shard_id in s.parents]
    assert len(children) == 2
    after = [r["Data"] for c in children for r in reader.next_batch(c, ShardState()).records]
    assert after == [b"after"]


def test_the_reader_resubscribes_when_a_subscription_ends(endpoints: Endpoints) -> None:
    timing = Timing(subscription_sec=1.0, poll_sec=0.01)
    with EfoEndpoint(endpoints.aws_url, timing=timing) as short:
        try:
            client, options, consumer = new_stream(short.url)
            stream = options.stream_name
            client.put_record(StreamName=stream, Data=b"one", PartitionKey="k")
            shard = shard_ids(client, stream)[0]
            reader = EfoShardReader(client, options, consumer)
            first = reader.next_batch(shard, ShardState())
            assert [r["Data"] for r in first.records] == [b"one"]
            # The server ends the subscription after 1 s; a record put then
            # is read through the next one, after the last sequence number.
            poll(lambda: short.stats()["open"] == 0, "the subscription's end", timeout=30)
            client.put_record(StreamName=stream, Data=b"two", PartitionKey="k")
            second = reader.next_batch(shard, first.state)
            assert [r["Data"] for r in second.records] == [b"two"]
            assert short.subscriptions.served == 2
        finally:
            kinesis_efo.close_subscriptions()


def test_a_second_subscription_gets_resource_in_use_then_takes_over(
    endpoints: Endpoints,
) -> None:
    timing = Timing(rate_sec=0.0, in_use_sec=1.5, poll_sec=0.01)
    with EfoEndpoint(endpoints.aws_url, timing=timing) as front:
        try:
            client, options, consumer = new_stream(front.url)
            stream = options.stream_name
            client.put_record(StreamName=stream, Data=b"x", PartitionKey="k")
            shard = shard_ids(client, stream)[0].shard_id
            position = {"Type": "TRIM_HORIZON"}
            held = client.subscribe_to_shard(
                ConsumerARN=consumer, ShardId=shard, StartingPosition=position
            )["EventStream"]
            with pytest.raises(ClientError) as refused:
                client.subscribe_to_shard(
                    ConsumerARN=consumer, ShardId=shard, StartingPosition=position
                )
            assert refused.value.response["Error"]["Code"] == "ResourceInUseException"
            # The reader backs off (1 s steps) until the in-use window is over,
            # takes the subscription over and reads; the held one is told so.
            reader = EfoShardReader(client, options, consumer)
            batch = reader.next_batch(ShardInfo(shard), ShardState())
            assert [r["Data"] for r in batch.records] == [b"x"]
            with pytest.raises(ClientError, match="ResourceInUseException"):
                for _ in held:
                    pass
        finally:
            kinesis_efo.close_subscriptions()


def test_calls_faster_than_one_per_second_are_limited(front: EfoEndpoint) -> None:
    client, options, consumer = new_stream(front.url)
    shard = shard_ids(client, options.stream_name)[0].shard_id
    position = {"Type": "LATEST"}
    first = client.subscribe_to_shard(
        ConsumerARN=consumer, ShardId=shard, StartingPosition=position
    )["EventStream"]
    try:
        with pytest.raises(ClientError) as limited:
            client.subscribe_to_shard(
                ConsumerARN=consumer, ShardId=shard, StartingPosition=position
            )
        assert limited.value.response["Error"]["Code"] == "LimitExceededException"
    finally:
        first.close()


def test_other_calls_reach_moto_through_the_front(front: EfoEndpoint) -> None:
    client, options, consumer = new_stream(front.url)
    stream_arn = consumer.partition("/consumer/")[0]
    listed = client.list_stream_consumers(StreamARN=stream_arn)["Consumers"]
    assert [c["ConsumerName"] for c in listed] == ["job"]
    with pytest.raises(ClientError, match="ResourceNotFoundException"):
        client.subscribe_to_shard(
            ConsumerARN=consumer.replace("/consumer/job", "/consumer/nobody"),
            ShardId="shardId-000000000000",
            StartingPosition={"Type": "LATEST"},
        )
    unused = replace(options, consumer_name="other")
    assert ensure_consumer(client, unused).endswith("/consumer/other")


# ------------------------------------------------------------- the harness wiring


def test_the_harness_points_an_efo_instance_at_the_front(tmp_path: Path) -> None:
    """payments of the example of known shape reads with enhanced fan-out: its
    Kinesis endpoint is the front, S3 stays on moto; orders polls moto directly."""
    fronted = Endpoints("http://127.0.0.1:1", "127.0.0.1:2", "http://127.0.0.1:3")
    declared = {i.instance_id: i for i in load_example_instances(EXAMPLE_CDK_JSON)}
    payments = build_job_config(declared["payments-ap-northeast-2"], tmp_path, fronted)
    assert payments.source.consumer_type == "SubscribeToShard"
    assert payments.kinesis_endpoint_url == "http://127.0.0.1:3"
    assert payments.s3_endpoint_url == "http://127.0.0.1:1"
    orders = build_job_config(declared["orders-ap-northeast-2"], tmp_path, fronted)
    assert orders.source.consumer_type == "GetRecords"
    assert orders.kinesis_endpoint_url == "http://127.0.0.1:1"


def test_the_summary_names_the_reader_and_the_subscriptions() -> None:
    assert source_line("python-kinesis", "GetRecords", None, None) == (
        "python-kinesis, polling (GetRecords)"
    )
    assert source_line("python-kinesis", "SubscribeToShard", "p-job", 12) == (
        "python-kinesis, enhanced fan-out (SubscribeToShard via consumer p-job; "
        "12 subscriptions served)"
    )
    assert "unknown" in source_line("python-kinesis", "SubscribeToShard", "p-job", None)


@pytest.mark.parametrize(("served", "flagged"), [(0, True), (3, False), (None, False)])
def test_a_fan_out_run_with_no_subscription_is_a_problem(served: int | None, flagged: bool) -> None:
    """Rows that reached the table while the endpoint served no subscription
    came by polling: the run must not pass as an enhanced fan-out run."""
    figures = RunFigures(
        instance="p",
        produced_records=1,
        produced_by_kind={"valid": 1},
        expected_ids=frozenset({"a"}),
        expected_failures={},
        table_ids=["a"],
        topic_reasons_by_key={},
        topic_records=0,
        fan_out_subscriptions=served,
    )
    problems = summarize(figures).problems
    assert any("served no subscription" in p for p in problems) is flagged, problems
    assert len(problems) == int(flagged)


def test_the_emulators_run_the_front_and_report_its_figures(endpoints: Endpoints) -> None:
    """The harness's front (a child process) answers its figures and forwards
    the rest to moto."""
    assert endpoints.kinesis_efo_url is not None
    before = read_stats(endpoints.kinesis_efo_url)
    client, options, consumer = new_stream(endpoints.kinesis_efo_url)
    shard = shard_ids(client, options.stream_name)[0]
    client.put_record(StreamName=options.stream_name, Data=b"via-child", PartitionKey="k")
    try:
        batch = EfoShardReader(client, options, consumer).next_batch(shard, ShardState())
    finally:
        kinesis_efo.close_subscriptions()
    assert [r["Data"] for r in batch.records] == [b"via-child"]
    assert read_stats(endpoints.kinesis_efo_url)["served"] == before["served"] + 1


def test_the_harness_registers_the_consumer_as_the_stack_would(front: EfoEndpoint) -> None:
    """Locally, the harness registers the consumer once
    (what AWS::Kinesis::StreamConsumer does on AWS) and the job's reader,
    given its ARN, only describes it through the front: one consumer."""

    client, options, _ = new_stream(front.url)
    arn = register_stack_consumer(client, options.stream_name, "stack-job")
    assert register_stack_consumer(client, options.stream_name, "stack-job") == arn
    by_arn = replace(options, consumer_name="stack-job", consumer_arn=arn)
    assert ensure_consumer(client, by_arn) == arn
    stream_arn = arn.partition("/consumer/")[0]
    listed = client.list_stream_consumers(StreamARN=stream_arn)["Consumers"]
    assert sorted(c["ConsumerName"] for c in listed) == ["job", "stack-job"]
