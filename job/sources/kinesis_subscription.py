"""One ``SubscribeToShard`` subscription of the ``python-kinesis`` source's
enhanced fan-out, read by a thread of its own (:mod:`job.sources.kinesis_efo`
reads a shard's batches through it).

``SubscribeToShard`` pushes ``SubscribeToShardEvent`` s (``Records``,
``ContinuationSequenceNumber``, ``MillisBehindLatest``, ``ChildShards`` at the
end of the shard) for up to 5 minutes
(https://docs.aws.amazon.com/kinesis/latest/APIReference/API_SubscribeToShard.html).
``MillisBehindLatest == 0`` means caught up, "no new records to process at
this moment"; ``ChildShards`` is "returned only at the end of the current
shard" (https://docs.aws.amazon.com/kinesis/latest/APIReference/API_SubscribeToShardEvent.html).

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

The worker that holds a shard's subscription says so with a lock in the
executor's temporary directory (:class:`HostLock`), so that another worker of
the same executor reads that shard with GetRecords instead of taking the
subscription over.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import tempfile
import threading
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from model.kinesis_offsets import ShardState, sequence_key


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
class Subscription:
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
