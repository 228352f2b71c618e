"""moto server with Kinesis resharding that behaves like Kinesis.

moto 5.2.5 deviates from Kinesis in two ways that make any exactly-once reader
look broken after a shard split:

* ``SplitShard`` *moves* the parent's records into the children, re-put with
  new sequence numbers (Kinesis leaves them in the closed parent, readable
  until retention expires, and the children start empty);
* ``MergeShards`` likewise copies both parents' records into the child (and
  its adjacency check accepts only one of the two orders);
* ``PutRecord(s)`` keeps routing keys to the first shard whose hash range
  matches, which is the closed parent (Kinesis only writes to open shards).
  Its range check also excludes each shard's ``EndingHashKey``.

and a shard's reads race its writes and slow down as it grows:

* ``Shard.get_records`` iterates the shard's dict in Python while another
  server thread's ``PutRecords`` inserts into it, so a read during a put fails
  with HTTP 500 ("OrderedDict mutated during iteration"), which no reader
  should retry (it is no Kinesis error);
* that read scans from the shard's first record, and every put, ``LATEST``
  iterator and shard description lists all the shard's keys: each call costs
  O(records in the shard), so a long local run slows down by itself.

``python -m local.moto_server`` patches exactly those methods (the shard ones
behind one lock, with an index of sequence numbers beside moto's dict) and then
runs moto's own server entry point, with EMR Serverless patched too
(:mod:`local.serverless_moto`); every other API is stock moto.

With ``MOTO_REQUEST_LOG`` set to a file, every request the server answers is
appended to it as one JSON line (:func:`local.request_log.moto_entry`): the
log ``python -m bench.requests`` counts a batch's AWS requests from.
"""

from __future__ import annotations

import bisect
import hashlib
import io
import json
import os
import sys
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

import moto.server
from moto.kinesis import models
from moto.kinesis.exceptions import InvalidArgumentError
from moto.server import main as moto_main

from local.request_log import REQUEST_LOG_ENV, moto_entry
from local.serverless_moto import patch_emr_serverless

# Every shard's records and index change together, and are read, under it.
_SHARDS_LOCK = threading.Lock()


def _split_shard(self: Any, shard_to_split: str, new_starting_hash_key: str) -> None:

    parent = self.shards[shard_to_split]
    boundary = int(new_starting_hash_key)
    if not parent.starting_hash < boundary <= parent.ending_hash:
        raise InvalidArgumentError(
            message=f"NewStartingHashKey {boundary} is outside shard {shard_to_split}'s range"
        )
    if not parent.is_open:
        raise InvalidArgumentError(
            message=f"Shard {shard_to_split} has already been merged or split"
        )
    first = max(shard._shard_id for shard in self.shards.values()) + 1
    left = models.Shard(first, parent.starting_hash, boundary - 1, parent=parent.shard_id)
    right = models.Shard(first + 1, boundary, parent.ending_hash, parent=parent.shard_id)
    self.shards = {**self.shards, left.shard_id: left, right.shard_id: right}
    parent.is_open = False  # records stay in the parent, readable to its end


def _merge_shards(self: Any, shard_to_merge: str, adjacent_shard_to_merge: str) -> None:

    first, second = self.shards[shard_to_merge], self.shards[adjacent_shard_to_merge]
    low, high = sorted((first, second), key=lambda shard: shard.starting_hash)
    if low.ending_hash + 1 != high.starting_hash:
        raise InvalidArgumentError(
            message=f"Shards {shard_to_merge} and {adjacent_shard_to_merge} are not adjacent"
        )
    if not (first.is_open and second.is_open):
        raise InvalidArgumentError(message="a shard to merge has already been merged or split")
    child = models.Shard(
        max(shard._shard_id for shard in self.shards.values()) + 1,
        low.starting_hash,
        high.ending_hash,
        parent=first.shard_id,
        adjacent_parent=second.shard_id,
    )
    self.shards = {**self.shards, child.shard_id: child}
    first.is_open = False  # records stay in the parents, readable to their ends
    second.is_open = False


def _shard_for_key(self: Any, partition_key: str, explicit_hash_key: str) -> Any:

    if not isinstance(partition_key, str) or len(partition_key) > 256:
        raise InvalidArgumentError("partition_key")
    if explicit_hash_key:
        key = int(explicit_hash_key)
        if key >= 2**128:
            raise InvalidArgumentError("explicit_hash_key")
    else:
        key = int(hashlib.md5(partition_key.encode("utf-8")).hexdigest(), 16)
    for shard in self.shards.values():
        if shard.is_open and shard.starting_hash <= key <= shard.ending_hash:
            return shard
    return None


def _order(shard: Any) -> list[int]:
    """The shard's sequence numbers, ascending: an index beside moto's dict,
    rebuilt when something other than :func:`_put_record` changed the dict.
    Call with the lock held."""
    order: list[int] | None = shard.__dict__.get("_sequence_order")
    if order is None or len(order) != len(shard.records):
        order = list(shard.records)
        shard._sequence_order = order
    return order


def _put_record(self: Any, partition_key: str, data: str, explicit_hash_key: str) -> str:

    with _SHARDS_LOCK:
        order = _order(self)
        sequence_number = (order[-1] if order else 0) + 1
        self.records[sequence_number] = models.Record(
            partition_key, data, sequence_number, explicit_hash_key
        )
        order.append(sequence_number)
    return str(sequence_number)


def _get_records(self: Any, last_sequence_id: str, limit: int | None) -> tuple[list[Any], int, int]:
    """moto's answer (records after ``last_sequence_id``, at most ``limit``; the
    last sequence number returned or the one given; milliseconds from the last
    returned record to the newest) in O(log n + limit)."""
    last = int(last_sequence_id)
    with _SHARDS_LOCK:
        order = _order(self)
        start = bisect.bisect_right(order, last)
        chosen = order[start : start + limit if limit else None]
        if not chosen:
            return [], last, 0
        records = [self.records[number] for number in chosen]
        newest = self.records[order[-1]]
    return records, chosen[-1], int((newest.created_at - records[-1].created_at) * 1000)


def _min_sequence_number(self: Any) -> int:
    with _SHARDS_LOCK:
        order = _order(self)
        return order[0] if order else 0


def _max_sequence_number(self: Any) -> int:
    with _SHARDS_LOCK:
        order = _order(self)
        return order[-1] if order else 0


def patch_kinesis() -> None:

    models.Stream.split_shard = _split_shard  # type: ignore[method-assign]
    models.Stream.merge_shards = _merge_shards  # type: ignore[method-assign]
    models.Stream.get_shard_for_key = _shard_for_key  # type: ignore[method-assign]
    models.Shard.put_record = _put_record  # type: ignore[method-assign]
    models.Shard.get_records = _get_records  # type: ignore[method-assign]
    models.Shard.get_min_sequence_number = _min_sequence_number  # type: ignore[method-assign]
    models.Shard.get_max_sequence_number = _max_sequence_number  # type: ignore[method-assign]


class _LoggedApp:
    """moto's WSGI application, each answered request appended to ``path``."""

    def __init__(self, app: Any, path: str) -> None:
        self.app, self.path = app, path
        self.lock = threading.Lock()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.app, name)

    def __call__(
        self, environ: dict[str, Any], start_response: Callable[..., Any]
    ) -> Iterable[bytes]:
        # The body is read here (a query-protocol Action lives in it) and
        # handed on unchanged.
        length = int(environ.get("CONTENT_LENGTH") or 0)
        body = environ["wsgi.input"].read(length) if length else b""
        environ["wsgi.input"] = io.BytesIO(body)
        started = time.time()
        status: list[str] = []

        def recording(code: str, headers: Any, *rest: Any) -> Any:
            status.append(code)
            return start_response(code, headers, *rest)

        result = self.app(environ, recording)
        entry = moto_entry(environ, body, status[0] if status else "", started, time.time())
        with self.lock, open(self.path, "a", encoding="utf-8") as log:
            log.write(json.dumps(entry) + "\n")
        return result  # type: ignore[no-any-return]


def patch_request_log(path: str) -> None:
    """Wrap the application moto's ``main`` builds so that it logs to ``path``."""
    stock = moto.server.DomainDispatcherApplication  # type: ignore[attr-defined]

    def logged(*args: Any, **kwargs: Any) -> Any:
        return _LoggedApp(stock(*args, **kwargs), path)

    moto.server.DomainDispatcherApplication = logged  # type: ignore[attr-defined,assignment]


def main(argv: list[str] | None = None) -> None:
    patch_kinesis()
    patch_emr_serverless()  # EMR Serverless modes, retry policy, labels
    if os.environ.get(REQUEST_LOG_ENV):
        patch_request_log(os.environ[REQUEST_LOG_ENV])
    moto_main(argv if argv is not None else sys.argv[1:])


if __name__ == "__main__":
    main()
