"""Enhanced fan-out for the ``python-kinesis`` source: a shard read through a
``SubscribeToShard`` subscription of the instance's registered consumer.

What Kinesis promises, and what this module does about it:

* ``SubscribeToShard`` pushes ``SubscribeToShardEvent`` s (``Records``,
  ``ContinuationSequenceNumber``, ``MillisBehindLatest``, ``ChildShards`` at the
  end of the shard) for up to 5 minutes; then the consumer subscribes again.
  One call per second per consumer and shard (``LimitExceededException`` past
  it); a second call within 5 seconds of a successful one gets
  ``ResourceInUseException``, one 5 seconds or more later takes the
  subscription over (API reference,
  https://docs.aws.amazon.com/kinesis/latest/APIReference/API_SubscribeToShard.html).
  ``MillisBehindLatest == 0`` means caught up, "no new records to process at
  this moment"; ``ChildShards`` is "returned only at the end of the current
  shard" (https://docs.aws.amazon.com/kinesis/latest/APIReference/API_SubscribeToShardEvent.html).
* A consumer "can't read data while in the CREATING or DELETING states"
  (https://docs.aws.amazon.com/kinesis/latest/APIReference/API_Consumer.html);
  RegisterStreamConsumer answers CREATING and becomes ACTIVE later, so
  :func:`ensure_consumer` polls DescribeStreamConsumer, bounded.

boto3 consumes it: botocore models ``SubscribeToShard``'s output as an event
stream (``OperationModel.has_event_stream_output``; its JSON parser reads the
``initial-response`` event, then ``response["EventStream"]`` yields one dict
per event; https://botocore.amazonaws.com/v1/documentation/api/latest/reference/eventstream.html,
https://boto3.amazonaws.com/v1/documentation/api/latest/reference/services/kinesis/client/subscribe_to_shard.html).
People read Kinesis that way with ``for event in resp["EventStream"]`` (e.g.
https://github.com/floci-io/floci/issues/562, which reproduces an emulator bug
with exactly that boto3 loop; aws-sdk-perl issue
https://github.com/pplu/aws-sdk-perl/issues/371: "boto definitely deals with
it"). botocore sends it over its urllib3 session (HTTP/1.1, a chunked
response body read as it arrives).

The 5-second rule shapes the design: a subscription per batch would fail every
batch that follows its predecessor within 5 seconds (a 1 s trigger). So a
subscription outlives the batch that opened it: it stays open in this process
(an executor's Python worker is reused across tasks), its events buffered by
one thread per subscription (a bounded queue: a full buffer stops reading the
socket), and the next batch of the same shard that starts exactly where the
last one ended continues it. Any other start, an error, the end of the shard
or :func:`close_subscriptions` closes it. A subscription that nobody continues
ends on the server within 5 minutes, and its thread with it.
"""

from __future__ import annotations

import contextlib
import queue
import random
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import partial
from typing import Any, Final

from app.sources.kinesis_fetch import (
    Backoff,
    ShardBatch,
    call_with_backoff,
    error_code,
    make_client,
)
from app.sources.kinesis_offsets import ShardInfo, ShardState
from app.sources.kinesis_options import ReaderOptions, parse_options

# One SubscribeToShard call per second per consumer and shard (API reference).
SUBSCRIBE_INTERVAL_SEC: Final = 1.0
# Attempts at one subscribe call refused with ResourceInUse (the previous
# subscription is younger than 5 s) or LimitExceeded, 1 s apart: > 5 s in all.
SUBSCRIBE_ATTEMPTS: Final = 8
# Fresh subscriptions one batch may open after the previous one ended
# (5-minute end, a takeover, a dropped connection) before the batch fails.
RESUBSCRIBES_PER_BATCH: Final = 5
# Events buffered per subscription before its thread stops reading.
EVENT_BUFFER: Final = 64
# How long ensure_consumer waits for a consumer to become ACTIVE.
CONSUMER_ACTIVE_TIMEOUT_SEC: Final = 120.0
CONSUMER_POLL_SEC: Final = 1.0

# Errors inside a subscription that end it without ending the read: the batch
# subscribes again. Anything else (a vanished stream, KMS refusals) fails it.
SUBSCRIPTION_OVER: Final = frozenset(
    {"ResourceInUseException", "InternalFailureException", "KMSThrottlingException"}
)
SUBSCRIBE_LATER: Final = frozenset(
    {"ResourceInUseException", "LimitExceededException", "InternalFailureException"}
)


# ----------------------------------------------------------------------- pure parts


def starting_position(start: ShardState) -> dict[str, Any]:
    """SubscribeToShard's ``StartingPosition`` for a shard state: after the last
    sequence number read, else at the pinned timestamp, else the shard's start."""
    if start.after is not None:
        return {"Type": "AFTER_SEQUENCE_NUMBER", "SequenceNumber": start.after}
    if start.ts is not None:
        return {"Type": "AT_TIMESTAMP", "Timestamp": datetime.fromtimestamp(start.ts, UTC)}
    return {"Type": "TRIM_HORIZON"}


@dataclass(frozen=True)
class EventView:
    """What one ``SubscribeToShardEvent`` says: its records (GetRecords-shaped
    dicts), whether the subscriber is caught up, and whether the shard ended."""

    records: list[dict[str, Any]]
    caught_up: bool
    ended: bool
    continuation: str | None


def event_view(event: Mapping[str, Any]) -> EventView:
    """An event of ``response["EventStream"]`` (``{"SubscribeToShardEvent": {...}}``).
    The shard has ended when the event lists child shards or carries no
    continuation sequence number (nothing to continue from)."""
    body = event.get("SubscribeToShardEvent")
    if not isinstance(body, Mapping):
        raise ValueError(f"SubscribeToShard: unexpected event {sorted(event)!r}")
    continuation = body.get("ContinuationSequenceNumber")
    return EventView(
        records=[dict(record) for record in body.get("Records") or []],
        caught_up=int(body.get("MillisBehindLatest") or 0) == 0,
        ended=bool(body.get("ChildShards")) or continuation is None,
        continuation=None if continuation is None else str(continuation),
    )


def stream_arn_of(consumer_arn: str) -> str:
    """``arn:...:stream/NAME/consumer/C:TS`` → ``arn:...:stream/NAME``."""
    head, sep, _ = consumer_arn.partition("/consumer/")
    if not sep:
        raise ValueError(f"consumer ARN {consumer_arn!r}: expected .../stream/NAME/consumer/...")
    return head


# ------------------------------------------------------------------- the consumer


def ensure_consumer(
    client: Any,
    options: ReaderOptions,
    *,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
    timeout: float = CONSUMER_ACTIVE_TIMEOUT_SEC,
) -> str:
    """The ARN of ``options.consumer_name`` on the stream, registered if absent,
    once ACTIVE. Run once on the driver at start. On AWS the stack registers
    it (infra/constructs/stream.py), so this only describes it; locally and
    for a direct ``format("python-kinesis")`` user it registers it."""
    name = options.consumer_name
    if not name:
        raise ValueError(
            "kinesis.consumerName: required with kinesis.consumerType SubscribeToShard"
        )
    backoff = _backoff(options)

    def call(fn: Callable[[], Any]) -> Any:
        return call_with_backoff(fn, backoff, sleep)

    summary = call(partial(client.describe_stream_summary, StreamName=options.stream_name))
    stream_arn = str(summary["StreamDescriptionSummary"]["StreamARN"])
    describe = partial(client.describe_stream_consumer, StreamARN=stream_arn, ConsumerName=name)
    deadline = clock() + timeout
    registered = False
    while True:
        try:
            description = call(describe)["ConsumerDescription"]
        except Exception as exc:
            if error_code(exc) != "ResourceNotFoundException" or registered:
                raise
            try:
                call(
                    partial(
                        client.register_stream_consumer, StreamARN=stream_arn, ConsumerName=name
                    )
                )
            except Exception as reg:
                if error_code(reg) == "AccessDeniedException":
                    raise RuntimeError(
                        f"enhanced fan-out consumer {name!r} is not registered on {stream_arn}, "
                        "and the job may not register it (the stack does: is it deployed?)"
                    ) from reg
                if error_code(reg) != "ResourceInUseException":  # registered meanwhile
                    raise
            registered = True
            continue
        status = str(description.get("ConsumerStatus"))
        if status == "ACTIVE":
            return str(description["ConsumerARN"])
        if status == "DELETING":
            raise RuntimeError(
                f"enhanced fan-out consumer {name!r} on {stream_arn} is being deleted"
            )
        if clock() >= deadline:
            raise TimeoutError(
                f"enhanced fan-out consumer {name!r} on {stream_arn} still {status} "
                f"after {timeout:.0f}s"
            )
        sleep(CONSUMER_POLL_SEC)


def register_consumer(options: Mapping[str, str]) -> str:
    """:func:`ensure_consumer` from the source's option strings (the job's
    start, on the driver): the consumer's ARN."""
    parsed = parse_options(options)
    return ensure_consumer(make_client(parsed), parsed)


def _backoff(options: ReaderOptions) -> Backoff:
    return Backoff(
        options.client_num_retries,
        options.client_retry_interval_ms,
        options.client_max_retry_interval_ms,
    )


# ------------------------------------------------------------------ subscriptions


@dataclass
class _Item:
    """What a subscription's thread hands over: an event, or the stream's end
    (``error`` None: it ended cleanly, e.g. the 5 minutes are over)."""

    view: EventView | None = None
    error: BaseException | None = None


@dataclass(eq=False)
class _Subscription:
    """One open SubscribeToShard stream, read into a bounded queue by a thread."""

    shard_id: str
    origin: ShardState  # where it started
    stream: Any  # botocore's EventStream
    items: queue.Queue[_Item] = field(default_factory=lambda: queue.Queue(EVENT_BUFFER))
    pending: deque[dict[str, Any]] = field(default_factory=deque)
    position: str | None = None  # the last sequence number handed to a batch
    caught_up: bool = False
    shard_ended: bool = False  # an event said so; done once ``pending`` is empty
    over: bool = False  # no more events will come
    closed: threading.Event = field(default_factory=threading.Event)

    def start(self) -> None:
        threading.Thread(target=self._pump, name=f"efo-{self.shard_id}", daemon=True).start()

    def _pump(self) -> None:
        item = _Item()
        try:
            for event in self.stream:
                if not self._put(_Item(view=event_view(event))):
                    return
        except Exception as exc:
            item = _Item(error=exc)
        self._put(item)

    def _put(self, item: _Item) -> bool:
        while not self.closed.is_set():
            try:
                self.items.put(item, timeout=0.2)
                return True
            except queue.Full:
                continue
        return False

    def resumes(self, start: ShardState) -> bool:
        """Whether a batch starting at ``start`` continues this subscription."""
        if self.over or self.closed.is_set():
            return False
        if self.position is None:
            return start.after == self.origin.after and start.ts == self.origin.ts
        return start.after == self.position

    def absorb(self, view: EventView) -> None:
        self.pending.extend(view.records)
        self.caught_up = view.caught_up
        self.shard_ended = self.shard_ended or view.ended

    def take(self, limit: int) -> list[dict[str, Any]]:
        taken = [self.pending.popleft() for _ in range(min(limit, len(self.pending)))]
        if taken:
            self.position = str(taken[-1]["SequenceNumber"])
        return taken

    def close(self) -> None:
        self.closed.set()
        with contextlib.suppress(Exception):
            self.stream.close()


# Open subscriptions of this process, by (consumer ARN, shard): a Python worker
# runs the tasks of many batches, so the next batch of a shard finds its
# subscription here. Guarded by _LOCK; a subscription itself is used by one
# batch at a time (one task reads a shard).
_OPEN: dict[tuple[str, str], _Subscription] = {}
_LAST_SUBSCRIBE: dict[tuple[str, str], float] = {}
_LOCK = threading.Lock()


def close_subscriptions(consumer_arn: str | None = None) -> int:
    """Close this process's open subscriptions (of one consumer, or all);
    returns how many were open."""
    with _LOCK:
        keys = [key for key in _OPEN if consumer_arn is None or key[0] == consumer_arn]
        subscriptions = [_OPEN.pop(key) for key in keys]
    for subscription in subscriptions:
        subscription.close()
    return len(subscriptions)


def open_subscriptions() -> int:
    with _LOCK:
        return len(_OPEN)


@dataclass(eq=False)
class EfoShardReader:
    """Reads shards through ``consumer_arn``'s subscriptions; the same contract
    as :meth:`app.sources.kinesis_fetch.ShardReader.next_batch`."""

    client: Any
    options: ReaderOptions
    consumer_arn: str
    sleep: Callable[[float], None] = time.sleep
    clock: Callable[[], float] = time.monotonic
    rand: Callable[[], float] = random.random

    def next_batch(self, shard: ShardInfo, start: ShardState) -> ShardBatch:
        """The next batch of ``shard`` after ``start``: at most
        kinesis.maxFetchRecordsPerShard records, read within
        kinesis.maxFetchTimePerShardSec; it ends early once an event says the
        subscriber is caught up and nothing more is buffered, and marks the
        shard done when the subscription reached the shard's end."""
        limit = self.options.max_fetch_records_per_shard
        deadline = self.clock() + self.options.max_fetch_time_per_shard_sec
        key = (self.consumer_arn, shard.shard_id)
        subscription = self._subscription(key, start)
        records: list[dict[str, Any]] = []
        resubscribed = 0
        try:
            while True:
                records.extend(subscription.take(limit - len(records)))
                if subscription.shard_ended and not subscription.pending:
                    self._forget(key, subscription)
                    return self._batch(start, records, done=True)
                if len(records) >= limit:
                    break
                if subscription.caught_up and subscription.items.empty() and not subscription.over:
                    break
                remaining = deadline - self.clock()
                if remaining <= 0:
                    break
                try:
                    item = subscription.items.get(timeout=remaining)
                except queue.Empty:
                    break
                if item.view is not None:
                    subscription.absorb(item.view)
                    continue
                # The subscription is over: the 5 minutes passed, another
                # subscriber took it over, or the connection dropped.
                subscription.over = True
                self._forget(key, subscription)
                code = error_code(item.error) if item.error is not None else None
                if code is not None and code not in SUBSCRIPTION_OVER:
                    raise item.error  # type: ignore[misc]
                if resubscribed >= RESUBSCRIBES_PER_BATCH:
                    raise RuntimeError(
                        f"shard {shard.shard_id}: subscription ended {resubscribed + 1} times "
                        f"in one batch (last: {item.error!r})"
                    )
                resubscribed += 1
                resume = start.advanced(subscription.position, done=False)
                subscription = self._open(key, resume)
        except BaseException:
            self._forget(key, subscription)
            raise
        return self._batch(start, records, done=False)

    @staticmethod
    def _batch(start: ShardState, records: list[dict[str, Any]], *, done: bool) -> ShardBatch:
        last = str(records[-1]["SequenceNumber"]) if records else None
        return ShardBatch(records, start.advanced(last, done))

    def _subscription(self, key: tuple[str, str], start: ShardState) -> _Subscription:
        with _LOCK:
            found = _OPEN.get(key)
        if found is not None and found.resumes(start):
            return found
        if found is not None:
            self._forget(key, found)
        return self._open(key, start)

    def _forget(self, key: tuple[str, str], subscription: _Subscription) -> None:
        with _LOCK:
            if _OPEN.get(key) is subscription:
                del _OPEN[key]
        subscription.close()

    def _open(self, key: tuple[str, str], start: ShardState) -> _Subscription:
        """Subscribe at ``start``, keeping one call per second per shard and
        backing off (1 s steps, SUBSCRIBE_ATTEMPTS calls in all: the batch's
        time budget does not cut it short, the 5 s window must pass) while
        Kinesis answers ResourceInUse (the previous subscription is younger
        than 5 s) or LimitExceeded."""
        consumer_arn, shard_id = key
        position = starting_position(start)
        attempt = 0
        while True:
            self._pace(key)
            try:
                response = self.client.subscribe_to_shard(
                    ConsumerARN=consumer_arn, ShardId=shard_id, StartingPosition=position
                )
            except Exception as exc:
                code = error_code(exc)
                if code not in SUBSCRIBE_LATER or attempt + 1 >= SUBSCRIBE_ATTEMPTS:
                    raise
                attempt += 1
                self.sleep(SUBSCRIBE_INTERVAL_SEC * (1.0 + self.rand() * 0.2))
                continue
            subscription = _Subscription(shard_id, start, response["EventStream"])
            subscription.start()
            with _LOCK:
                previous = _OPEN.pop(key, None)
                _OPEN[key] = subscription
            if previous is not None:
                previous.close()
            return subscription

    def _pace(self, key: tuple[str, str]) -> None:
        with _LOCK:
            last = _LAST_SUBSCRIBE.get(key)
        if last is not None:
            wait = SUBSCRIBE_INTERVAL_SEC - (self.clock() - last)
            if wait > 0:
                self.sleep(wait)
        with _LOCK:
            _LAST_SUBSCRIBE[key] = self.clock()
