"""Enhanced fan-out for the ``python-kinesis`` source: a shard's batch read
through a ``SubscribeToShard`` subscription of the instance's consumer.

The consumer is :mod:`job.sources.kinesis_consumer`'s (the stack's on AWS);
one subscription, its reading thread and its host lock are
:mod:`job.sources.kinesis_subscription`'s. This module keeps a process's open
subscriptions and reads each batch through them (:class:`EfoShardReader`).

What Kinesis promises: ``SubscribeToShard`` pushes events for up to 5 minutes;
then the consumer subscribes again. One call per second per consumer and
shard (``LimitExceededException`` past it); a second call within 5 seconds of
a successful one gets ``ResourceInUseException``, one 5 seconds or more later
takes the subscription over (API reference,
https://docs.aws.amazon.com/kinesis/latest/APIReference/API_SubscribeToShard.html).

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
executor's temporary directory (:class:`~job.sources.kinesis_subscription.HostLock`),
and another worker reads
that shard's batch with GetRecords (the ``fallback``) instead of taking it
over or waiting out the 5 s; the holder skips what the others read. A refused
subscribe (ResourceInUse, LimitExceeded) falls back the same way, at once.
Any other start (a retried batch before the subscription's position), an
error, the end of the shard or :func:`close_subscriptions` closes it. A
subscription that nobody continues ends on the server within 5 minutes, its
thread with it, and the lock is released.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from job.sources.kinesis_fetch import ShardBatch, error_code
from job.sources.kinesis_options import ReaderOptions
from job.sources.kinesis_subscription import (
    HostLock,
    Subscription,
    host_lock_path,
    starting_position,
)
from model.kinesis_offsets import ShardInfo, ShardState

# One SubscribeToShard call per second per consumer and shard (API reference).
SUBSCRIBE_INTERVAL_SEC: Final = 1.0
# Attempts at one subscribe call refused with ResourceInUse (the previous
# subscription is younger than 5 s) or LimitExceeded, 1 s apart: > 5 s in all.
SUBSCRIBE_ATTEMPTS: Final = 8
# Fresh subscriptions one batch may open after the previous one ended
# (5-minute end, a takeover, a dropped connection) before the batch fails.
RESUBSCRIBES_PER_BATCH: Final = 5

# Errors inside a subscription that end it without ending the read: the batch
# subscribes again. Anything else (a vanished stream, KMS refusals) fails it.
SUBSCRIPTION_OVER: Final = frozenset(
    {"ResourceInUseException", "InternalFailureException", "KMSThrottlingException"}
)
SUBSCRIBE_LATER: Final = frozenset(
    {"ResourceInUseException", "LimitExceededException", "InternalFailureException"}
)


# Open subscriptions of this process, by (consumer ARN, shard): a Python worker
# runs the tasks of many batches, so a later batch of a shard finds its
# subscription here. Guarded by _LOCK; a subscription itself is used by one
# batch at a time (one task reads a shard).
_OPEN: dict[tuple[str, str], Subscription] = {}
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

    def _subscription(self, key: tuple[str, str], start: ShardState) -> Subscription:
        with _LOCK:
            found = _OPEN.get(key)
        if found is not None and found.resumes(start):
            return found
        if found is not None:
            self._forget(key, found)
        return self._open(key, start)

    def _forget(self, key: tuple[str, str], subscription: Subscription) -> None:
        with _LOCK:
            if _OPEN.get(key) is subscription:
                del _OPEN[key]
        subscription.close()

    def _open(self, key: tuple[str, str], start: ShardState) -> Subscription:
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
            subscription = Subscription(
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
