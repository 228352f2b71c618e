"""A fast stand-in for Kinesis' read API on loopback, for the reader benchmarks.

moto server is one Python process that parses, stores and re-encodes every
record: it answers slower than one reader core consumes (docs/design.md), so
a benchmark against it measures moto. This server answers ``ListShards``,
``GetShardIterator`` and ``GetRecords`` (the JSON 1.1 protocol botocore
speaks to Kinesis: ``X-Amz-Target: Kinesis_20131202.<Operation>``) over a
fixed set of records made up front, and nothing else:

* each shard holds ``records_per_shard`` records of ``record_bytes`` bytes
  (64 distinct payloads, base64-encoded once); a page is built once (one
  string join, no parse) and kept, so a repeated drain is served from memory;
* only the first ``visible`` records of each shard are served until
  ``POST /_visible`` raises it, so a benchmark can start its query on a
  warm-up and then release the backlog at a known moment;
* ``MillisBehindLatest`` is 0 on a page that reaches the visible end, else
  1000; iterators are ``shard|position`` and never expire.

It runs in a process of its own (:func:`serve_in_process`): a threaded HTTP
server, one thread per connection (botocore keeps connections alive).
:func:`raw_rate` measures how fast it serves, with plain HTTP and no decode,
to show it answers faster than the readers consume.
"""

from __future__ import annotations

import base64
import http.client
import json
import multiprocessing
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Final

TARGET_PREFIX: Final = "Kinesis_20131202."
PAYLOADS: Final = 64
SEQUENCE_BASE: Final = 49_000_000_000_000_000_000
PAGE_MAX: Final = 10_000  # GetRecords' Limit ceiling


@dataclass(frozen=True)
class Layout:
    shards: int
    records_per_shard: int
    record_bytes: int = 750

    def shard_id(self, index: int) -> str:
        return f"shardId-{index:012d}"


class _State:
    def __init__(self, layout: Layout) -> None:
        self.layout = layout
        self.visible = layout.records_per_shard
        self.shards = {layout.shard_id(i): i for i in range(layout.shards)}
        pad = layout.record_bytes - 40
        self.data = [
            base64.b64encode(
                json.dumps({"id": f"payload-{n}", "pad": "x" * max(0, pad)}).encode()
            ).decode()
            for n in range(PAYLOADS)
        ]
        self.arrival = time.time()
        self.pages: dict[tuple[str, int, int], bytes] = {}

    def sequence(self, shard: int, position: int) -> str:
        return str(SEQUENCE_BASE + shard * 10**9 + position)

    def position(self, shard: int, sequence: str) -> int:
        return int(sequence) - SEQUENCE_BASE - shard * 10**9

    def page(self, shard_id: str, position: int, limit: int) -> bytes:
        """One GetRecords body, built once per (shard, start, end): a
        benchmark's repeats ask for the same pages, which then cost the server
        a dict lookup and a socket write."""
        stop = max(position, min(self.visible, position + min(limit, PAGE_MAX)))
        key = (shard_id, position, stop)
        body = self.pages.get(key)
        if body is None:
            body = self._build(shard_id, position, stop)
            self.pages[key] = body
        return body

    def _build(self, shard_id: str, position: int, stop: int) -> bytes:
        shard = self.shards[shard_id]
        arrival = f"{self.arrival:.3f}"
        pieces = [
            f'{{"SequenceNumber":"{self.sequence(shard, n)}","Data":"{self.data[n % PAYLOADS]}",'
            f'"PartitionKey":"k{n % 997}","ApproximateArrivalTimestamp":{arrival}}}'
            for n in range(position, stop)
        ]
        behind = 0 if stop >= self.visible else 1000
        body = (
            f'{{"Records":[{",".join(pieces)}],"NextShardIterator":"{shard_id}|{stop}",'
            f'"MillisBehindLatest":{behind}}}'
        )
        return body.encode()

    def answer(self, operation: str, request: dict[str, Any]) -> bytes:
        if operation == "ListShards":
            shards = [
                {
                    "ShardId": shard_id,
                    "HashKeyRange": {"StartingHashKey": "0", "EndingHashKey": "1"},
                    "SequenceNumberRange": {"StartingSequenceNumber": self.sequence(i, 0)},
                }
                for shard_id, i in self.shards.items()
            ]
            return json.dumps({"Shards": shards}).encode()
        if operation == "GetShardIterator":
            shard_id = request["ShardId"]
            kind = request["ShardIteratorType"]
            if kind == "AFTER_SEQUENCE_NUMBER":
                position = self.position(self.shards[shard_id], request["StartingSequenceNumber"])
                position += 1
            elif kind == "LATEST":
                position = self.visible
            else:  # TRIM_HORIZON; AT_TIMESTAMP before every record
                position = 0
            return json.dumps({"ShardIterator": f"{shard_id}|{position}"}).encode()
        if operation == "GetRecords":
            shard_id, position = request["ShardIterator"].split("|")
            return self.page(shard_id, int(position), int(request.get("Limit", PAGE_MAX)))
        raise KeyError(operation)


def _handler(state: _State) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:  # quiet
            pass

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", 0))
            raw = self.rfile.read(length)
            if self.path == "/_visible":
                state.visible = min(int(raw), state.layout.records_per_shard)
                self._send(200, b"{}")
                return
            target = self.headers.get("X-Amz-Target", "")
            try:
                body = state.answer(target.removeprefix(TARGET_PREFIX), json.loads(raw or b"{}"))
            except KeyError as exc:
                error = {"__type": "UnknownOperationException", "message": str(exc)}
                self._send(400, json.dumps(error).encode())
                return
            self._send(200, body)

        def _send(self, status: int, body: bytes) -> None:
            self.send_response(status)
            self.send_header("Content-Type", "application/x-amz-json-1.1")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    return Handler


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that hung up (a query stopped mid-read) is no error here."""


def _serve(layout: Layout, visible: int, ready: Any) -> None:
    state = _State(layout)
    state.visible = visible
    server = _Server(("127.0.0.1", 0), _handler(state))
    ready.send(server.server_address[1])
    server.serve_forever()


@contextmanager
def serve_in_process(layout: Layout, visible: int) -> Iterator[str]:
    """The server in a process of its own (spawned: this one runs a JVM
    gateway); yields its endpoint URL."""
    context = multiprocessing.get_context("spawn")
    parent, child = context.Pipe()
    process = context.Process(target=_serve, args=(layout, visible, child), daemon=True)
    process.start()
    try:
        if not parent.poll(60):
            raise RuntimeError("the Kinesis stand-in did not start within 60 s")
        yield f"http://127.0.0.1:{parent.recv()}"
    finally:
        process.terminate()
        process.join(10)


def set_visible(endpoint: str, visible: int) -> None:
    """Serve the first ``visible`` records of every shard from now on."""
    host, port = endpoint.removeprefix("http://").split(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=10)
    try:
        connection.request("POST", "/_visible", body=str(visible).encode())
        reply = connection.getresponse()
        reply.read()
        if reply.status != 200:
            raise RuntimeError(f"/_visible answered {reply.status}")
    finally:
        connection.close()


def raw_rate(endpoint: str, layout: Layout, threads: int) -> float:
    """Records per second the server hands out to ``threads`` plain HTTP
    clients paging through every shard (no JSON parse, no decode)."""
    host, port = endpoint.removeprefix("http://").split(":")

    def drain(shard: int) -> int:
        connection = http.client.HTTPConnection(host, int(port), timeout=30)
        shard_id = layout.shard_id(shard)
        position, count = 0, 0
        try:
            while position < layout.records_per_shard:
                request = json.dumps({"ShardIterator": f"{shard_id}|{position}", "Limit": PAGE_MAX})
                target = {"X-Amz-Target": TARGET_PREFIX + "GetRecords"}
                connection.request("POST", "/", body=request, headers=target)
                reply = connection.getresponse()
                reply.read()
                step = min(PAGE_MAX, layout.records_per_shard - position)
                position += step
                count += step
        finally:
            connection.close()
        return count

    started = time.perf_counter()
    with ThreadPoolExecutor(threads) as pool:
        total = sum(pool.map(drain, range(layout.shards)))
    return total / (time.perf_counter() - started)
