"""Enhanced fan-out for the ``python-kinesis`` source: a shard read through a
``SubscribeToShard`` subscription of the instance's consumer.

Who owns the consumer: on AWS the stack (``AWS::Kinesis::StreamConsumer`` in
infra/constructs/stream.py, deleted with the stack), whose ARN reaches the job
in its config (``source.consumer_arn``, option ``kinesis.python.consumerArn``):
:func:`ensure_consumer` only describes it and waits for it to be ACTIVE,
never registers one. Locally the harness registers it on moto as the stack
would and passes the ARN the same way (local/harness.py). Only a direct
``format("python-kinesis")`` user without an ARN gets the consumer named
``kinesis.consumerName`` registered by :func:`ensure_consumer`.

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
  a new one is CREATING and becomes ACTIVE later, so :func:`ensure_consumer`
  polls DescribeStreamConsumer, bounded.

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
(an executor's Python worker is reused across tasks), its records buffered by
one thread per subscription (at most kinesis.maxFetchRecordsPerShard records:
then the thread stops reading the socket), and a later batch of the same shard
that starts where it stands, or further on, continues it.

But Spark gives a shard's next task to any free Python worker, not to the one
that subscribed, and only one subscription per consumer and shard can live.
Measured before this rule (``python -m bench latency_efo``): two workers took
the two shards in turns, every other batch took the subscription over, and
the new one first re-sent the whole backlog since its last batch. So the
worker that holds a shard's subscription says so with a lock in the
executor's temporary directory (:class:`HostLock`), and another worker reads
that shard's batch with GetRecords (the ``fallback``) instead of taking it
over or waiting out the 5 s; the holder skips what the others read. A refused
subscribe (ResourceInUse, LimitExceeded) falls back the same way, at once.
Any other start (a retried batch before the subscription's position), an
error, the end of the shard or :func:`close_subscriptions` closes it. A
subscription that nobody continues ends on the server within 5 minutes, its
thread with it, and the lock is released.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import random
import tempfile
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import partial
from typing import Any, Final

from job.sources.kinesis_fetch import (
    Backoff,
    ShardBatch,
    call_with_backoff,
    error_code,
    make_client,
)
from job.sources.kinesis_options import ReaderOptions, parse_options
from model.kinesis_offsets import ShardInfo, ShardState, sequence_key

# One SubscribeToShard call per second per consumer and shard (API reference).
SUBSCRIBE_INTERVAL_SEC: Final = 1.0
# Attempts at one subscribe call refused with ResourceInUse (the previous
# subscription is younger than 5 s) or LimitExceeded, 1 s apart: > 5 s in all.
SUBSCRIBE_ATTEMPTS: Final = 8
# Fresh subscriptions one batch may open after the previous one ended
# (5-minute end, a takeover, a dropped connection) before the batch fails.
RESUBSCRIBES_PER_BATCH: Final = 5
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
    """The consumer's ARN once it is ACTIVE. Run once on the driver at start.

    With ``options.consumer_arn`` (the job: the stack's consumer on AWS, the
    harness's locally) it is described by ARN and never registered: a
    missing one stops the start with a message naming the stack. Without it
    (a direct ``format("python-kinesis")`` user) ``options.consumer_name`` is
    registered on the stream if absent."""
    if options.consumer_arn:
        return _await_active(
            partial(client.describe_stream_consumer, ConsumerARN=options.consumer_arn),
            f"enhanced fan-out consumer {options.consumer_arn}",
            options,
            sleep=sleep,
            clock=clock,
            timeout=timeout,
        )
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


def _await_active(
    describe: Callable[[], Any],
    what: str,
    options: ReaderOptions,
    *,
    sleep: Callable[[float], None],
    clock: Callable[[], float],
    timeout: float,
) -> str:
    """Describe the stack's consumer until ACTIVE; it is never registered here."""
    backoff = _backoff(options)
    deadline = clock() + timeout
    while True:
        try:
            description = call_with_backoff(describe, backoff, sleep)["ConsumerDescription"]
        except Exception as exc:
            if error_code(exc) == "ResourceNotFoundException":
                raise RuntimeError(
                    f"{what} does not exist: the stack owns it (AWS::Kinesis::StreamConsumer); "
                    "deploy the instance's stack, the job does not register one"
                ) from exc
            raise
        status = str(description.get("ConsumerStatus"))
        if status == "ACTIVE":
            return str(description["ConsumerARN"])
        if status == "DELETING":
            raise RuntimeError(f"{what} is being deleted")
        if clock() >= deadline:
            raise TimeoutError(f"{what} still {status} after {timeout:.0f}s")
        sleep(CONSUMER_POLL_SEC)


def register_consumer(options: Mapping[str, str]) -> str:
    """:func:`ensure_consumer` from the source's option strings (the job's
    start, on the driver): the consumer's ARN (the stack's, when the options
    carry it)."""
    parsed = parse_options(options)
    return ensure_consumer(make_client(parsed), parsed)


def _backoff(options: ReaderOptions) -> Backoff:
    return Backoff(
        options.client_num_retries,
        options.client_retry_interval_ms,
        options.client_max_retry_interval_ms,
    )


# ------------------------------------------------------------------ subscriptions


def host_lock_path(consumer_arn: str, shard_id: str, directory: str | None = None) -> str:
    """The file whose lock says "a process of this executor holds the
    subscription of (consumer, shard)": in the executor's temporary directory,
    named by a digest of the consumer ARN (ARNs hold ``/`` and ``:``)."""
    digest = hashlib.sha256(consumer_arn.encode("utf-8")).hexdigest()[:16]
    return os.path.join(directory or tempfile.gettempdir(), f"efo-{digest}-{shard_id}.lock")


class HostLock:
    """An exclusive ``flock`` on :func:`host_lock_path`, held for as long as
    this process holds the subscription. The kernel drops it when the process
    dies, so a killed Python worker never strands a shard."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._fd: int | None = None
        self._guard = threading.Lock()  # the pump thread and a batch may both release

    def acquire(self) -> bool:
        """Take the lock without waiting; False when another process holds it."""
        if self._fd is not None:
            return True
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            return False
        self._fd = fd
        return True

    def release(self) -> None:
        with self._guard:
            fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)  # closing the descriptor releases its flock


@dataclass(eq=False)
class _Subscription:
    """One open SubscribeToShard stream, read by a thread into a buffer of at
    most ``capacity`` records (then the thread stops reading the socket until
    a batch takes some: back-pressure, as Kinesis' flow control expects)."""

    shard_id: str
    origin: ShardState  # where it started
    stream: Any  # botocore's EventStream
    capacity: int
    host_lock: HostLock | None = None
    changed: threading.Condition = field(default_factory=threading.Condition)
    pending: deque[dict[str, Any]] = field(default_factory=deque)
    position: str | None = None  # the last sequence number handed to a batch
    seen: str | None = None  # the last sequence number received
    caught_up: bool = False  # what the last event said
    # The thread waited for room since a batch last took records: the events
    # behind it were sent while it waited, so their "caught up" is stale.
    stalled: bool = False
    shard_ended: bool = False  # an event said so; done once ``pending`` is empty
    end: BaseException | None = None  # why no more events will come (with ``finished``)
    finished: bool = False
    over: bool = False  # a batch saw ``finished``
    closed: threading.Event = field(default_factory=threading.Event)

    def start(self) -> None:
        threading.Thread(target=self._pump, name=f"efo-{self.shard_id}", daemon=True).start()

    def _pump(self) -> None:
        error: BaseException | None = None
        try:
            for event in self.stream:
                if not self._absorb(event_view(event)):
                    return
        except Exception as exc:
            error = exc
        finally:
            # Nothing more will be read: let another process subscribe.
            if self.host_lock is not None:
                self.host_lock.release()
        with self.changed:
            self.end, self.finished = error, True
            self.changed.notify_all()

    def _absorb(self, view: EventView) -> bool:
        with self.changed:
            while len(self.pending) >= self.capacity:
                if self.closed.is_set():
                    return False
                self.stalled = True
                self.changed.wait(0.2)
            if self.closed.is_set():
                return False
            self.pending.extend(view.records)
            if view.records:
                self.seen = str(view.records[-1]["SequenceNumber"])
            self.caught_up = view.caught_up
            self.shard_ended = self.shard_ended or view.ended
            self.changed.notify_all()
        return True

    def reference(self) -> str | None:
        """The sequence number this subscription's records follow."""
        return self.position if self.position is not None else self.origin.after

    def short_of(self, after: str | None) -> bool:
        """Whether the stream is known to hold records up to ``after`` that
        this subscription has not received yet: its "caught up" predates them."""
        received = self.seen if self.seen is not None else self.reference()
        return after is not None and sequence_key(received) < sequence_key(after)

    def resumes(self, start: ShardState) -> bool:
        """Whether a batch starting at ``start`` continues this subscription:
        it starts where the subscription stands, or further on (another process
        of the executor read the shard meanwhile, with GetRecords: the records
        up to ``start`` are skipped, the stream being in sequence order)."""
        if self.over or self.finished or self.closed.is_set():
            return False
        reference = self.reference()
        if reference is None:
            return start.after == self.origin.after and start.ts == self.origin.ts
        if start.after is None or sequence_key(start.after) < sequence_key(reference):
            return False
        # A full buffer that holds nothing after ``start`` is old news: the
        # stream would have to be re-read from there; subscribe at ``start``.
        return not (self.stalled and self.short_of(start.after))

    def take(self, after: str | None, limit: int) -> list[dict[str, Any]]:
        """Up to ``limit`` buffered records after sequence number ``after``
        (caller holds ``changed``)."""
        floor = sequence_key(after)
        while self.pending and sequence_key(str(self.pending[0]["SequenceNumber"])) <= floor:
            self.pending.popleft()
        taken = [self.pending.popleft() for _ in range(min(limit, len(self.pending)))]
        if taken:
            self.position = str(taken[-1]["SequenceNumber"])
        self.changed.notify_all()
        return taken

    def close(self) -> None:
        self.closed.set()
        with contextlib.suppress(Exception):
            self.stream.close()
        if self.host_lock is not None:
            self.host_lock.release()
        with self.changed:
            self.changed.notify_all()


# Open subscriptions of this process, by (consumer ARN, shard): a Python worker
# runs the tasks of many batches, so a later batch of a shard finds its
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


class _UnavailableError(Exception):
    """The subscription is held elsewhere right now (another process of this
    executor holds it, or Kinesis answered ResourceInUse / LimitExceeded)."""


@dataclass(eq=False)
class EfoShardReader:
    """Reads shards through ``consumer_arn``'s subscriptions; the same contract
    as :meth:`job.sources.kinesis_fetch.ShardReader.next_batch`.

    ``fallback`` (the job's GetRecords reader) reads a batch whose shard's
    subscription is held elsewhere: Spark gives a shard's next task to any
    free Python worker, and only one of them can hold the subscription (a
    second subscribe within 5 s is refused, a later one takes it over). So the
    worker that holds it keeps it (its lock in the executor's temporary
    directory says so), and the others read that shard's batch with GetRecords
    instead of waiting out the 5 s window or taking it over; the holder skips
    what they read when it gets the shard again. Without ``fallback`` (a
    single-process reader) a refused subscribe is retried, 1 s apart,
    SUBSCRIBE_ATTEMPTS times."""

    client: Any
    options: ReaderOptions
    consumer_arn: str
    fallback: Callable[[ShardInfo, ShardState], ShardBatch] | None = None
    sleep: Callable[[float], None] = time.sleep
    clock: Callable[[], float] = time.monotonic
    rand: Callable[[], float] = random.random
    lock_dir: str | None = None

    def next_batch(self, shard: ShardInfo, start: ShardState) -> ShardBatch:
        """The next batch of ``shard`` after ``start``: at most
        kinesis.maxFetchRecordsPerShard records, read within
        kinesis.maxFetchTimePerShardSec. It ends as soon as the subscriber is
        caught up (the last event said so and every record received is
        taken), and marks the shard done when the subscription reached the
        shard's end. ``caught_up`` in the answer is True only when it ended
        that way on a fresh "caught up": a batch that stopped on a bound, or
        whose buffer had stalled, tells the driver to plan the next at once."""
        limit = self.options.max_fetch_records_per_shard
        deadline = self.clock() + self.options.max_fetch_time_per_shard_sec
        key = (self.consumer_arn, shard.shard_id)
        try:
            subscription = self._subscription(key, start)
        except _UnavailableError:
            return self._fall_back(shard, start, [])
        records: list[dict[str, Any]] = []
        resubscribed = 0
        try:
            while True:
                with subscription.changed:
                    after = str(records[-1]["SequenceNumber"]) if records else start.after
                    records.extend(subscription.take(after, limit - len(records)))
                    if subscription.shard_ended and not subscription.pending:
                        self._forget(key, subscription)
                        return self._batch(start, records, done=True, caught_up=True)
                    if len(records) >= limit:
                        return self._batch(start, records, done=False, caught_up=False)
                    if not subscription.finished:
                        if (
                            subscription.caught_up
                            and not subscription.pending
                            and not subscription.short_of(start.after)
                        ):
                            fresh = not subscription.stalled
                            subscription.stalled = False
                            return self._batch(start, records, done=False, caught_up=fresh)
                        remaining = deadline - self.clock()
                        if remaining <= 0:
                            return self._batch(start, records, done=False, caught_up=False)
                        subscription.changed.wait(remaining)
                        continue
                # The subscription is over: the 5 minutes passed, another
                # subscriber took it over, or the connection dropped.
                subscription.over = True
                error = subscription.end
                self._forget(key, subscription)
                code = error_code(error) if error is not None else None
                if error is not None and code is not None and code not in SUBSCRIPTION_OVER:
                    raise error
                if resubscribed >= RESUBSCRIBES_PER_BATCH:
                    raise RuntimeError(
                        f"shard {shard.shard_id}: subscription ended {resubscribed + 1} times "
                        f"in one batch (last: {error!r})"
                    )
                resubscribed += 1
                last = str(records[-1]["SequenceNumber"]) if records else None
                resume = start.advanced(last, done=False)
                try:
                    subscription = self._open(key, resume)
                except _UnavailableError:
                    return self._fall_back(shard, start, records)
        except BaseException:
            self._forget(key, subscription)
            raise

    def _fall_back(
        self, shard: ShardInfo, start: ShardState, records: list[dict[str, Any]]
    ) -> ShardBatch:
        """The rest of the batch read with GetRecords, after ``records``."""
        if self.fallback is None:  # only _open with a fallback raises _UnavailableError
            raise RuntimeError("EfoShardReader: no GetRecords fallback to read with")
        last = str(records[-1]["SequenceNumber"]) if records else None
        rest = self.fallback(shard, start.advanced(last, done=False))
        return ShardBatch([*records, *rest.records], rest.state, rest.caught_up)

    @staticmethod
    def _batch(
        start: ShardState, records: list[dict[str, Any]], *, done: bool, caught_up: bool
    ) -> ShardBatch:
        last = str(records[-1]["SequenceNumber"]) if records else None
        return ShardBatch(records, start.advanced(last, done), caught_up)

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
        """Subscribe at ``start``, one call per second per shard. With a
        fallback: only if no other process of the executor holds the shard's
        subscription, and a refusal (ResourceInUse: a subscription younger
        than 5 s; LimitExceeded) raises :class:`_UnavailableError` at once. Without
        one: refusals are retried 1 s apart, SUBSCRIBE_ATTEMPTS calls in all
        (the batch's time budget does not cut it short: the 5 s must pass)."""
        consumer_arn, shard_id = key
        host_lock = None
        if self.fallback is not None:
            host_lock = HostLock(host_lock_path(consumer_arn, shard_id, self.lock_dir))
            if not host_lock.acquire():
                raise _UnavailableError(shard_id)
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
                if self.fallback is not None and code in SUBSCRIBE_LATER:
                    if host_lock is not None:
                        host_lock.release()
                    raise _UnavailableError(shard_id) from exc
                if code not in SUBSCRIBE_LATER or attempt + 1 >= SUBSCRIBE_ATTEMPTS:
                    if host_lock is not None:
                        host_lock.release()
                    raise
                attempt += 1
                self.sleep(SUBSCRIBE_INTERVAL_SEC * (1.0 + self.rand() * 0.2))
                continue
            subscription = _Subscription(
                shard_id,
                start,
                response["EventStream"],
                capacity=self.options.max_fetch_records_per_shard,
                host_lock=host_lock,
            )
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
