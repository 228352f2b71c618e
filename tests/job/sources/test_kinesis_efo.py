"""job.sources.kinesis_efo without a network: the reader against a stub client
whose event streams are lists."""

# The stub mirrors boto3's keyword names (ConsumerARN, ShardId, ...).
# ruff: noqa: N803

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from job.sources import kinesis_efo
from job.sources.kinesis_efo import EfoShardReader
from job.sources.kinesis_fetch import ShardBatch
from job.sources.kinesis_options import parse_options
from job.sources.kinesis_subscription import HostLock, host_lock_path
from model.kinesis_offsets import ShardInfo, ShardState
from model.polling import poll_until
from tests.fake_clock import FakeClock
from tests.job.source_helpers import EFO_OPTIONS as OPTIONS
from tests.job.source_helpers import client_error
from tests.job.source_helpers import efo_event as event
from tests.job.source_helpers import efo_record as record

ARN = "arn:aws:kinesis:us-east-1:123456789012:stream/s/consumer/c:1700000000"
SHARD = ShardInfo("shardId-000000000000")


@pytest.fixture(autouse=True)
def _fresh_registry(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(kinesis_efo, "_LAST_SUBSCRIBE", {})
    yield
    kinesis_efo.close_subscriptions()


class FakeStream:
    """botocore's EventStream stand-in: yields ``events``, then ends (``then``
    "end"), raises ``then`` (an exception) or waits until closed ("block")."""

    def __init__(self, events: list[dict[str, Any]], then: Any = "block") -> None:
        self.events = events
        self.then = then
        self.closed = threading.Event()

    def __iter__(self) -> Iterator[dict[str, Any]]:
        yield from self.events
        if isinstance(self.then, BaseException):
            raise self.then
        if self.then == "block":
            self.closed.wait(30)
            raise ConnectionError("closed")

    def close(self) -> None:
        self.closed.set()


class FakeKinesis:
    def __init__(self, *answers: Any) -> None:
        self.answers = list(answers)
        self.calls: list[dict[str, Any]] = []

    def subscribe_to_shard(
        self, ConsumerARN: str, ShardId: str, StartingPosition: dict[str, Any]
    ) -> Any:
        self.calls.append({"shard": ShardId, "position": StartingPosition})
        answer = self.answers.pop(0)
        if isinstance(answer, BaseException):
            raise answer
        return {"EventStream": answer}


def reader(client: FakeKinesis, clock: FakeClock | None = None, **options: Any) -> EfoShardReader:
    clock = clock or FakeClock()
    return EfoShardReader(
        client,
        replace(OPTIONS, **options),
        ARN,
        sleep=clock.sleep,
        clock=clock,
        rand=lambda: 0.0,
    )


def test_options_accept_subscribe_to_shard_with_a_consumer_name() -> None:
    base = {
        "kinesis.streamName": "s",
        "kinesis.region": "us-east-1",
        "kinesis.metadataPath": "ends",
    }
    efo = parse_options(
        {**base, "kinesis.consumerType": "subscribeToShard", "kinesis.consumerName": "job"}
    )
    assert (efo.consumer_type, efo.consumer_name) == ("SubscribeToShard", "job")
    polling = parse_options({**base, "kinesis.consumerName": "ignored"})
    assert (polling.consumer_type, polling.consumer_name) == ("GetRecords", None)
    with pytest.raises(ValueError, match=r"kinesis\.consumerName: required"):
        parse_options({**base, "kinesis.consumerType": "SubscribeToShard"})
    with pytest.raises(ValueError, match="not one of GetRecords, SubscribeToShard"):
        parse_options({**base, "kinesis.consumerType": "Push"})


# ----------------------------------------------------------------------- the reader


def test_a_batch_ends_once_caught_up_and_the_next_continues_the_subscription() -> None:
    stream = FakeStream([event([1, 2], behind=900), event([3], behind=0)])
    client = FakeKinesis(stream)
    efo = reader(client)
    first = efo.next_batch(SHARD, ShardState())
    assert [r["SequenceNumber"] for r in first.records] == ["1", "2", "3"]
    assert first.state == ShardState(after="3")
    # Caught up, nothing buffered: the next batch ends at once, same subscription.
    second = efo.next_batch(SHARD, first.state)
    assert second.records == [] and second.state == first.state
    assert len(client.calls) == 1 and client.calls[0]["position"] == {"Type": "TRIM_HORIZON"}


def test_the_record_limit_splits_an_event_and_the_rest_waits_for_the_next_batch() -> None:
    client = FakeKinesis(FakeStream([event([1, 2, 3, 4, 5], behind=0)]))
    efo = reader(client, max_fetch_records_per_shard=2)
    got = []
    state = ShardState(after="0")
    for _ in range(3):
        batch = efo.next_batch(SHARD, state)
        got.append([r["SequenceNumber"] for r in batch.records])
        state = batch.state
    assert got == [["1", "2"], ["3", "4"], ["5"]]
    assert len(client.calls) == 1


def test_a_batch_from_before_the_subscription_opens_a_new_one() -> None:
    """A retried batch starts before what the subscription handed out."""
    client = FakeKinesis(FakeStream([event([1, 2])]), FakeStream([event([2])]))
    clock = FakeClock()
    efo = reader(client, clock)
    efo.next_batch(SHARD, ShardState())
    replay = efo.next_batch(SHARD, ShardState(after="1"))
    assert [r["SequenceNumber"] for r in replay.records] == ["2"]
    assert client.calls[1]["position"] == {"Type": "AFTER_SEQUENCE_NUMBER", "SequenceNumber": "1"}
    assert clock.slept == [1.0]  # one subscribe call per second per shard


def test_child_shards_mark_the_shard_done() -> None:
    client = FakeKinesis(FakeStream([event([7], behind=10), event([8], children=True)], "end"))
    batch = reader(client).next_batch(SHARD, ShardState(after="6"))
    assert [r["SequenceNumber"] for r in batch.records] == ["7", "8"]
    assert batch.state == ShardState(after="8", done=True)
    assert kinesis_efo.close_subscriptions() == 0  # none left open


def test_a_subscription_that_ends_mid_batch_is_renewed_after_the_last_record() -> None:
    client = FakeKinesis(
        FakeStream([event([1, 2], behind=5000)], "end"),  # the 5 minutes are over
        FakeStream([event([3], behind=0)]),
    )
    batch = reader(client).next_batch(SHARD, ShardState())
    assert [r["SequenceNumber"] for r in batch.records] == ["1", "2", "3"]
    assert client.calls[1]["position"] == {"Type": "AFTER_SEQUENCE_NUMBER", "SequenceNumber": "2"}


def test_a_takeover_inside_the_stream_is_a_subscription_end() -> None:
    client = FakeKinesis(
        FakeStream([event([1], behind=5000)], client_error("ResourceInUseException")),
        FakeStream([event([2])]),
    )
    batch = reader(client).next_batch(SHARD, ShardState())
    assert [r["SequenceNumber"] for r in batch.records] == ["1", "2"]


def test_other_errors_inside_the_stream_fail_the_batch() -> None:
    client = FakeKinesis(FakeStream([], client_error("ResourceNotFoundException")))
    with pytest.raises(Exception, match="ResourceNotFoundException"):
        reader(client).next_batch(SHARD, ShardState())
    assert kinesis_efo.close_subscriptions() == 0  # none left open


def test_resource_in_use_and_the_rate_limit_back_off_then_subscribe() -> None:
    clock = FakeClock()
    client = FakeKinesis(
        client_error("ResourceInUseException"),
        client_error("LimitExceededException"),
        FakeStream([event([1])]),
    )
    batch = reader(client, clock).next_batch(SHARD, ShardState())
    assert [r["SequenceNumber"] for r in batch.records] == ["1"]
    assert len(client.calls) == 3
    assert clock.slept and all(s >= 1.0 for s in clock.slept)


def test_subscribe_retries_are_bounded() -> None:
    client = FakeKinesis(*[client_error("ResourceInUseException")] * kinesis_efo.SUBSCRIBE_ATTEMPTS)
    with pytest.raises(Exception, match="ResourceInUseException"):
        reader(client).next_batch(SHARD, ShardState())
    assert len(client.calls) == kinesis_efo.SUBSCRIBE_ATTEMPTS


def test_an_idle_fresh_subscription_ends_the_batch_at_the_deadline() -> None:
    """No event at all (a silent server): the batch ends empty at its time
    budget, on the real clock, instead of waiting on the socket."""
    client = FakeKinesis(FakeStream([]))
    options = replace(OPTIONS, max_fetch_time_per_shard_sec=1)
    efo = EfoShardReader(client, options, ARN)
    started = time.monotonic()
    batch = efo.next_batch(SHARD, ShardState(after="3"))
    assert batch.records == [] and batch.state == ShardState(after="3")
    assert 0.9 <= time.monotonic() - started < 5


# ------------------------------------------- many Python workers, one subscription


class LiveStream:
    """An event stream fed while it is read: ``push`` an event, ``close`` ends it."""

    def __init__(self) -> None:
        self.events: queue.Queue[dict[str, Any] | None] = queue.Queue()

    def push(self, event: dict[str, Any]) -> None:
        self.events.put(event)

    def __iter__(self) -> Iterator[dict[str, Any]]:
        while (item := self.events.get()) is not None:
            yield item
        raise ConnectionError("closed")

    def close(self) -> None:
        self.events.put(None)


class GetRecordsFallback:
    """The job's GetRecords reader stand-in: what it was asked, what it returns."""

    def __init__(self, seqs: list[int]) -> None:
        self.seqs = seqs
        self.calls: list[ShardState] = []

    def __call__(self, shard: ShardInfo, start: ShardState) -> ShardBatch:
        self.calls.append(start)
        records = [record(s) for s in self.seqs]
        return ShardBatch(records, start.advanced(str(self.seqs[-1]), done=False), True)


def job_reader(
    client: FakeKinesis,
    fallback: GetRecordsFallback,
    lock_dir: Path,
    clock: FakeClock | None = None,
    **options: Any,
) -> EfoShardReader:
    clock = clock or FakeClock()
    return EfoShardReader(
        client,
        replace(OPTIONS, **options),
        ARN,
        fallback=fallback,
        sleep=clock.sleep,
        clock=clock,
        rand=lambda: 0.0,
        lock_dir=str(lock_dir),
    )


def seqs(batch: ShardBatch) -> list[str]:
    return [str(r["SequenceNumber"]) for r in batch.records]


def test_a_batch_stopped_by_its_record_limit_is_not_caught_up() -> None:
    """The driver plans at once after a bounded batch instead of probing."""
    limited = reader(
        FakeKinesis(FakeStream([event([1, 2, 3], behind=0)])), max_fetch_records_per_shard=2
    )
    first = limited.next_batch(SHARD, ShardState(after="0"))
    assert (seqs(first), first.caught_up) == (["1", "2"], False)
    rest = limited.next_batch(SHARD, first.state)
    assert (seqs(rest), rest.caught_up) == (["3"], True)


def test_a_batch_after_a_stalled_buffer_is_not_caught_up() -> None:
    """A full buffer stops reading the socket; the events read after that
    were sent while it waited, so their "caught up" may be stale."""
    stream = LiveStream()
    client = FakeKinesis(stream)
    efo = reader(client, max_fetch_records_per_shard=2)
    stream.push(event([1], behind=0))
    first = efo.next_batch(SHARD, ShardState(after="0"))
    assert (seqs(first), first.caught_up) == (["1"], True)
    stream.push(event([2, 3], behind=0))
    stream.push(event([4], behind=0))  # waits: two records are buffered already
    held = kinesis_efo._OPEN[(ARN, SHARD.shard_id)]
    poll_until(
        lambda: held.stalled,
        timeout=5,
        interval=0.01,
        on_timeout=lambda: AssertionError("the buffer never filled"),
    )
    second = efo.next_batch(SHARD, first.state)
    assert (seqs(second), second.caught_up) == (["2", "3"], False)
    poll_until(
        lambda: len(held.pending) == 1,
        timeout=5,
        interval=0.01,
        on_timeout=lambda: AssertionError("the waiting event was never read"),
    )
    third = efo.next_batch(SHARD, second.state)
    assert (seqs(third), third.caught_up) == (["4"], False)  # read after the stall
    fourth = efo.next_batch(SHARD, third.state)
    assert (seqs(fourth), fourth.caught_up) == ([], True)
    assert len(client.calls) == 1


def test_a_refused_subscribe_reads_the_batch_with_get_records_at_once(tmp_path: Path) -> None:
    """Another worker subscribed less than 5 s ago: no 5 s wait in the task."""
    fallback = GetRecordsFallback([4, 5])
    client = FakeKinesis(client_error("ResourceInUseException"))
    clock = FakeClock()
    efo = job_reader(client, fallback, tmp_path, clock)
    batch = efo.next_batch(SHARD, ShardState(after="3"))
    assert (seqs(batch), batch.state) == (["4", "5"], ShardState(after="5"))
    assert fallback.calls == [ShardState(after="3")]
    assert len(client.calls) == 1 and clock.slept == []
    assert kinesis_efo.close_subscriptions() == 0  # none left open
    # The refused worker holds nothing: a later one may subscribe.
    assert HostLock(host_lock_path(ARN, SHARD.shard_id, str(tmp_path))).acquire()


def test_a_shard_another_worker_holds_is_read_with_get_records(tmp_path: Path) -> None:
    other_worker = HostLock(host_lock_path(ARN, SHARD.shard_id, str(tmp_path)))
    assert other_worker.acquire()
    fallback = GetRecordsFallback([8])
    client = FakeKinesis()
    batch = job_reader(client, fallback, tmp_path).next_batch(SHARD, ShardState(after="7"))
    assert seqs(batch) == ["8"] and client.calls == []  # no subscribe call at all
    other_worker.release()


def test_the_holder_continues_past_what_another_worker_read(tmp_path: Path) -> None:
    """Worker A holds the subscription; worker B read 3..4 with GetRecords;
    A's next batch skips them in its stream instead of subscribing again."""
    stream = LiveStream()
    client = FakeKinesis(stream)
    efo = job_reader(client, GetRecordsFallback([0]), tmp_path)
    stream.push(event([1, 2], behind=0))
    first = efo.next_batch(SHARD, ShardState())
    assert seqs(first) == ["1", "2"]
    stream.push(event([3, 4, 5], behind=0))
    after_b = efo.next_batch(SHARD, ShardState(after="4"))
    assert (seqs(after_b), after_b.state, after_b.caught_up) == (
        ["5"],
        ShardState(after="5"),
        True,
    )
    assert len(client.calls) == 1
    # A start before what the subscription handed out (a retried batch): a
    # new subscription from there.
    assert not kinesis_efo._OPEN[(ARN, SHARD.shard_id)].resumes(ShardState(after="2"))


def test_a_caught_up_older_than_the_start_waits_for_the_records(tmp_path: Path) -> None:
    """The subscription's last event said "caught up" at 2, but another worker
    has read to 4 since: the records after 2 are on their way, so the batch
    waits for them rather than ending empty."""
    stream = LiveStream()
    client = FakeKinesis(stream)
    efo = job_reader(client, GetRecordsFallback([0]), tmp_path)
    stream.push(event([1, 2], behind=0))
    efo.next_batch(SHARD, ShardState())
    later = threading.Timer(0.3, stream.push, args=(event([3, 4, 5], behind=0),))
    later.start()
    batch = efo.next_batch(SHARD, ShardState(after="4"))
    later.join()
    assert (seqs(batch), batch.caught_up) == (["5"], True)


def test_the_subscription_holder_releases_the_shard_when_it_closes(tmp_path: Path) -> None:
    stream = LiveStream()
    efo = job_reader(FakeKinesis(stream), GetRecordsFallback([0]), tmp_path)
    stream.push(event([1], behind=0))
    efo.next_batch(SHARD, ShardState())
    lock = HostLock(host_lock_path(ARN, SHARD.shard_id, str(tmp_path)))
    assert not lock.acquire()
    kinesis_efo.close_subscriptions()
    assert lock.acquire()
    lock.release()
