"""A loopback Kinesis endpoint that serves ``SubscribeToShard`` (enhanced fan-out)
from moto's stream, and forwards every other call to moto.

moto 5.2.5 registers, describes, lists and deregisters stream consumers but has
no ``SubscribeToShard``. botocore sends it like any other Kinesis call: a JSON
``POST /`` with ``X-Amz-Target: Kinesis_20131202.SubscribeToShard`` to the
client's endpoint, over its urllib3 session (HTTP/1.1), and reads the answer as
an AWS event stream. So this front is what the job's ``kinesis.endpointUrl``
points at: it answers SubscribeToShard itself and proxies the rest to moto
byte for byte.

A subscription is served as an AWS event stream (:mod:`local.event_stream`):
the ``initial-response`` event botocore's JSON parser requires, then
``SubscribeToShardEvent`` s, sent as the chunks of a chunked response body as
records arrive.

The records come from moto through this process's own GetRecords calls (a
test stand-in: one poll per ``poll_sec``). What Kinesis does and this front
copies (https://docs.aws.amazon.com/kinesis/latest/APIReference/API_SubscribeToShard.html,
https://docs.aws.amazon.com/kinesis/latest/APIReference/API_SubscribeToShardEvent.html):

* a subscription lasts ``subscription_sec`` (Kinesis: 5 minutes), then the
  body ends and the consumer subscribes again;
* one call per ``rate_sec`` (1 s) per consumer and shard, else
  ``LimitExceededException``;
* a call within ``in_use_sec`` (5 s) of a successful one gets
  ``ResourceInUseException``; a later one takes the subscription over and the
  old one ends with a ``ResourceInUseException`` event;
* ``MillisBehindLatest`` 0 when caught up; at the end of a closed shard, one
  last event with ``ChildShards`` and no continuation sequence number.

Kinesis also sends an event when nothing arrives (``heartbeat_sec`` here), so
an idle subscriber still learns it is caught up.
"""

from __future__ import annotations

import argparse
import http.client
import json
import logging
import threading
import time
import urllib.parse
import urllib.request
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Final

import boto3
from botocore.config import Config

from local.event_stream import (
    EVENT_STREAM_TYPE,
    child_shards,
    event_message,
    exception_message,
    shard_event,
)
from producer.local_run import FAKE_CREDENTIALS

log = logging.getLogger(__name__)

TARGET_PREFIX: Final = "Kinesis_20131202."
SUBSCRIBE_TARGET: Final = TARGET_PREFIX + "SubscribeToShard"
# GET: the front's own figures as JSON (never forwarded to moto).
STATS_PATH: Final = "/_efo/stats"
_HOP_BY_HOP: Final = frozenset(
    {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade", "content-length"}
)


# -------------------------------------------------------------------- the server


@dataclass(frozen=True)
class Timing:
    """The front's clock rules; Kinesis' values by default, shorter in tests."""

    subscription_sec: float = 300.0
    rate_sec: float = 1.0
    in_use_sec: float = 5.0
    heartbeat_sec: float = 1.0
    poll_sec: float = 0.02


class _ApiError(Exception):
    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


@dataclass(eq=False)
class _Session:
    started: float
    taken_over: threading.Event = field(default_factory=threading.Event)


@dataclass
class _Subscriptions:
    """Who holds which (consumer, shard), and when each was last asked for."""

    timing: Timing
    lock: threading.Lock = field(default_factory=threading.Lock)
    last_call: dict[tuple[str, str], float] = field(default_factory=dict)
    last_success: dict[tuple[str, str], float] = field(default_factory=dict)
    active: dict[tuple[str, str], _Session] = field(default_factory=dict)
    served: int = 0

    def begin(self, key: tuple[str, str]) -> _Session:
        now = time.monotonic()
        with self.lock:
            last = self.last_call.get(key)
            self.last_call[key] = now
            if last is not None and now - last < self.timing.rate_sec:
                raise _ApiError(
                    "LimitExceededException",
                    f"Rate exceeded for consumer and shard {key[1]}: one call per second",
                )
            success = self.last_success.get(key)
            if success is not None and now - success < self.timing.in_use_sec:
                raise _ApiError(
                    "ResourceInUseException",
                    f"Another active subscription exists for this consumer on {key[1]}",
                )
            previous = self.active.get(key)
            if previous is not None:
                previous.taken_over.set()
            session = _Session(now)
            self.active[key] = session
            self.last_success[key] = now
            self.served += 1
            return session

    def end(self, key: tuple[str, str], session: _Session) -> None:
        with self.lock:
            if self.active.get(key) is session:
                del self.active[key]


class EfoEndpoint:
    """The front on 127.0.0.1:``port`` (0: a free one) before ``moto_url``."""

    def __init__(self, moto_url: str, port: int = 0, timing: Timing | None = None) -> None:
        self.moto_url = moto_url.rstrip("/")
        self.timing = timing or Timing()
        self.subscriptions = _Subscriptions(self.timing)
        self._clients: dict[str, Any] = {}
        self._clients_lock = threading.Lock()
        self._stopping = threading.Event()
        handler = type("Handler", (_Handler,), {"endpoint": self})
        self.server = ThreadingHTTPServer(("127.0.0.1", port), handler)
        self.server.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return int(self.server.server_address[1])

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> EfoEndpoint:
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        self.server.shutdown()
        self.server.server_close()

    def stats(self) -> dict[str, int]:
        """Subscriptions served since start, and open now."""
        subscriptions = self.subscriptions
        with subscriptions.lock:
            return {"served": subscriptions.served, "open": len(subscriptions.active)}

    def __enter__(self) -> EfoEndpoint:
        return self.start()

    def __exit__(self, *_: object) -> None:
        self.stop()

    def kinesis(self, region: str) -> Any:
        """A client of moto itself (never of this front)."""
        with self._clients_lock:
            found = self._clients.get(region)
            if found is None:
                found = boto3.client(
                    "kinesis",
                    endpoint_url=self.moto_url,
                    region_name=region,
                    aws_access_key_id=FAKE_CREDENTIALS["AWS_ACCESS_KEY_ID"],
                    aws_secret_access_key=FAKE_CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
                    config=Config(
                        connect_timeout=5,
                        read_timeout=15,
                        retries={"max_attempts": 2, "mode": "standard"},
                        max_pool_connections=64,
                    ),
                )
                self._clients[region] = found
            return found


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    endpoint: EfoEndpoint

    def log_message(self, format: str, *args: Any) -> None:
        log.debug(format, *args)

    def _body(self) -> bytes:
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def do_POST(self) -> None:
        body = self._body()
        if self.headers.get("X-Amz-Target") == SUBSCRIBE_TARGET:
            self._subscribe(body)
        else:
            self._forward(body)

    def do_GET(self) -> None:
        if self.path == STATS_PATH:
            payload = json.dumps(self.endpoint.stats()).encode("utf-8")
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)
            return
        self._forward(self._body())

    do_PUT = do_GET  # noqa: N815
    do_DELETE = do_GET  # noqa: N815
    do_HEAD = do_GET  # noqa: N815

    # ------------------------------------------------------------ the proxy

    def _forward(self, body: bytes) -> None:
        target = urllib.parse.urlsplit(self.endpoint.moto_url)
        connection = http.client.HTTPConnection(
            target.hostname or "127.0.0.1", target.port, timeout=60
        )
        try:
            headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP_BY_HOP}
            headers["Content-Length"] = str(len(body))
            connection.request(self.command, self.path, body=body, headers=headers)
            answer = connection.getresponse()
            payload = answer.read()
            self.send_response(answer.status, answer.reason)
            for name, value in answer.getheaders():
                if name.lower() not in _HOP_BY_HOP:
                    self.send_header(name, value)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(payload)
        finally:
            connection.close()

    # ------------------------------------------------------- the subscription

    def _error(self, code: str, message: str, status: int = 400) -> None:
        payload = json.dumps({"__type": code, "message": message}).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/x-amz-json-1.1")
        self.send_header("x-amzn-ErrorType", code)
        self.send_header("x-amzn-RequestId", str(uuid.uuid4()))
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):x}\r\n".encode("ascii") + data + b"\r\n")
        self.wfile.flush()

    def _subscribe(self, body: bytes) -> None:
        endpoint = self.endpoint
        try:
            request = json.loads(body or b"{}")
            consumer_arn = str(request["ConsumerARN"])
            shard_id = str(request["ShardId"])
            position = dict(request["StartingPosition"])
            region = consumer_arn.split(":")[3]
            stream_name = consumer_arn.split(":stream/", 1)[1].split("/consumer/", 1)[0]
        except (ValueError, KeyError, IndexError, TypeError) as exc:
            self._error("InvalidArgumentException", f"bad SubscribeToShard request: {exc!r}")
            return
        kinesis = endpoint.kinesis(region)
        key = (consumer_arn, shard_id)
        try:
            _consumer_active(kinesis, consumer_arn)
            session = endpoint.subscriptions.begin(key)
        except _ApiError as exc:
            self._error(exc.code, str(exc))
            return
        try:
            try:
                iterator = _iterator(kinesis, stream_name, shard_id, position)
            except Exception as exc:
                self._error("ResourceNotFoundException", f"shard {shard_id}: {exc}")
                return
            self.send_response(200)
            self.send_header("Content-Type", EVENT_STREAM_TYPE)
            self.send_header("Transfer-Encoding", "chunked")
            self.send_header("x-amzn-RequestId", str(uuid.uuid4()))
            self.end_headers()
            self._chunk(event_message("initial-response", {}))
            self._stream(kinesis, stream_name, shard_id, iterator, position, session)
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            pass  # the subscriber went away
        finally:
            endpoint.subscriptions.end(key, session)

    def _stream(  # noqa: PLR0917 (one subscription's whole state)
        self,
        kinesis: Any,
        stream_name: str,
        shard_id: str,
        iterator: str,
        position: Mapping[str, Any],
        session: _Session,
    ) -> None:
        timing = self.endpoint.timing
        stopping = self.endpoint._stopping
        continuation = str(position.get("SequenceNumber") or "0")
        last_sent = 0.0
        closed: bool | None = None
        while not stopping.is_set():
            now = time.monotonic()
            if session.taken_over.is_set():
                self._chunk(
                    exception_message(
                        "ResourceInUseException", "Another subscription took over this shard"
                    )
                )
                return
            if now - session.started >= timing.subscription_sec:
                return
            answer = kinesis.get_records(ShardIterator=iterator, Limit=10_000)
            iterator = answer.get("NextShardIterator") or iterator
            records = list(answer.get("Records") or [])
            behind = int(answer.get("MillisBehindLatest") or 0)
            if records:
                continuation = str(records[-1]["SequenceNumber"])
                self._chunk(
                    event_message(
                        "SubscribeToShardEvent", shard_event(records, continuation, behind)
                    )
                )
                last_sent = now
                continue
            # Nothing new: a closed shard read to its end ends here.
            if closed is None or now - last_sent >= timing.heartbeat_sec:
                shards = _list_shards(kinesis, stream_name)
                me = next((s for s in shards if s["ShardId"] == shard_id), None)
                closed = me is None or bool(
                    me.get("SequenceNumberRange", {}).get("EndingSequenceNumber")
                )
                if closed:
                    self._chunk(
                        event_message(
                            "SubscribeToShardEvent",
                            shard_event([], None, 0, child_shards(shards, shard_id)),
                        )
                    )
                    return
            if last_sent == 0.0 or now - last_sent >= timing.heartbeat_sec:
                self._chunk(
                    event_message("SubscribeToShardEvent", shard_event([], continuation, 0))
                )
                last_sent = now
            time.sleep(timing.poll_sec)


def _consumer_active(kinesis: Any, consumer_arn: str) -> None:
    try:
        found = kinesis.describe_stream_consumer(ConsumerARN=consumer_arn)["ConsumerDescription"]
    except Exception as exc:
        raise _ApiError("ResourceNotFoundException", f"consumer {consumer_arn}: {exc}") from exc
    if found.get("ConsumerStatus") != "ACTIVE":
        raise _ApiError("ResourceInUseException", f"consumer {consumer_arn} is not ACTIVE")


def _iterator(kinesis: Any, stream_name: str, shard_id: str, position: Mapping[str, Any]) -> str:
    args: dict[str, Any] = {
        "StreamName": stream_name,
        "ShardId": shard_id,
        "ShardIteratorType": position["Type"],
    }
    if "SequenceNumber" in position:
        args["StartingSequenceNumber"] = str(position["SequenceNumber"])
    if "Timestamp" in position:
        args["Timestamp"] = float(position["Timestamp"])
    return str(kinesis.get_shard_iterator(**args)["ShardIterator"])


def _list_shards(kinesis: Any, stream_name: str) -> list[dict[str, Any]]:
    answer = kinesis.list_shards(StreamName=stream_name)
    shards = list(answer.get("Shards") or [])
    while answer.get("NextToken"):
        answer = kinesis.list_shards(NextToken=answer["NextToken"])
        shards.extend(answer.get("Shards") or [])
    return shards


def read_stats(url: str, timeout: float = 5.0) -> dict[str, int]:
    """A running front's :meth:`EfoEndpoint.stats`, over HTTP."""
    with urllib.request.urlopen(url.rstrip("/") + STATS_PATH, timeout=timeout) as answer:
        found = json.loads(answer.read())
    return {str(k): int(v) for k, v in found.items()}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--moto", required=True, help="moto server's URL")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--subscription-sec", type=float, default=Timing.subscription_sec)
    args = parser.parse_args(argv)
    endpoint = EfoEndpoint(args.moto, args.port, Timing(subscription_sec=args.subscription_sec))
    print(f"efo endpoint on {endpoint.url} before {args.moto}", flush=True)
    endpoint.server.serve_forever()


if __name__ == "__main__":
    main()
