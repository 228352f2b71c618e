"""The AWS requests a micro-batch makes, from what the emulators and the local
file system saw (``python -m bench.requests`` runs the pipeline and writes the
counts; :mod:`infra.cost.requests` is the file they land in).

Two logs, one shape (:class:`Request`: when, service, API, prefix):

* moto's: every request the server answered (``MOTO_REQUEST_LOG``,
  :mod:`local.moto_server`): Kinesis and CloudWatch as they are on AWS;
* the job's file system calls (``strace``): locally the checkpoint, the state
  store, the table, the lease and the markers are files, not S3 objects. Each
  call is counted as the S3 request EMRFS/S3A makes for it: an open for
  writing is a PutObject, for reading a GetObject, of a directory a
  ListObjectsV2, a stat (a burst of them: :data:`STAT_BURST_SEC`) or a mkdir
  a HeadObject, an unlink a DeleteObject, a rename a
  CopyObject plus a DeleteObject (S3 has no rename). Hadoop's local
  ``.<name>.crc`` side files have no S3 counterpart and are left out;
* the Glue catalog (locally pyiceberg's SQLite catalog, no Glue emulator):
  counted from the table's metadata files, which pyiceberg reads once per
  GetTable and writes once per UpdateTable (:data:`GLUE_FOR_METADATA`).

Pure functions: log lines in, requests and per-batch counts out.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final
from urllib.parse import parse_qs

# The environment variable that turns moto server's request log on (a path).
REQUEST_LOG_ENV: Final = "MOTO_REQUEST_LOG"
# What the local catalog's calls stand for on Glue. pyiceberg's GlueCatalog
# reads the table (GetTable) and then its metadata file for every
# load_table, and for a commit reads the table, writes the new metadata file
# and points the table at it (UpdateTable) (pyiceberg/catalog/glue.py
# load_table, commit_table); its SqlCatalog does the same with SQLite rows.
# So each read of a ``*.metadata.json`` is a GetTable, each write an UpdateTable.
GLUE_FOR_METADATA: Final = {"GetObject": "GetTable", "PutObject": "UpdateTable"}


@dataclass(frozen=True)
class Request:
    """One AWS request (or the local call standing for one)."""

    t: float  # epoch seconds
    service: str  # s3, glue, kinesis, monitoring
    api: str
    prefix: str = ""  # S3: what the object is (checkpoint, state, table/data, ...)
    thread: str = ""  # who made it (a thread id, a user agent)


# --------------------------------------------------------------------------- moto


def moto_entry(
    environ: Mapping[str, Any], body: bytes, status: str, started: float, ended: float
) -> dict[str, Any]:
    """One line of moto's request log: what :func:`from_moto` reads back."""
    auth = str(environ.get("HTTP_AUTHORIZATION", ""))
    scope = re.search(r"Credential=[^/]+/[^/]+/[^/]+/([^/]+)/", auth)
    service = scope.group(1) if scope else ""
    return {
        "t": started,
        "ms": round((ended - started) * 1000, 3),
        "service": service,
        "api": api_name(
            service,
            str(environ.get("REQUEST_METHOD", "")),
            path=str(environ.get("PATH_INFO", "")),
            query=str(environ.get("QUERY_STRING", "")),
            target=str(environ.get("HTTP_X_AMZ_TARGET", "")),
            body=body,
            copy=bool(environ.get("HTTP_X_AMZ_COPY_SOURCE")),
        ),
        "path": str(environ.get("PATH_INFO", "")),
        "status": status.split(" ", 1)[0],
        "agent": str(environ.get("HTTP_USER_AGENT", ""))[:120],
    }


def api_name(
    service: str,
    method: str,
    *,
    path: str,
    query: str,
    target: str,
    body: bytes,
    copy: bool = False,
) -> str:
    """The API a request calls: its ``X-Amz-Target`` (JSON protocols), its
    ``/operation/`` path (RPC v2 CBOR, CloudWatch's), its ``Action`` (query
    protocol), or for S3 its method and path."""
    if target:
        return target.rsplit(".", 1)[-1]
    operation = re.search(r"/operation/([A-Za-z]+)$", path)
    if operation:
        return operation.group(1)
    if service == "s3":
        return _s3_api(method, path, query, copy=copy)
    params = parse_qs(query) or parse_qs(body.decode("utf-8", "replace"))
    return params.get("Action", [method])[0]


def _s3_api(method: str, path: str, query: str, *, copy: bool) -> str:
    has_key = "/" in path.strip("/")
    params = parse_qs(query, keep_blank_values=True)
    if method == "GET":
        return "GetObject" if has_key else "ListObjectsV2"
    if method == "PUT":
        return "CopyObject" if copy else ("PutObject" if has_key else "CreateBucket")
    if method == "POST" and "delete" in params:
        return "DeleteObjects"
    return {"HEAD": "HeadObject", "DELETE": "DeleteObject"}.get(method, method)


def from_moto(lines: Iterable[str], *, exclude_agents: tuple[str, ...] = ()) -> list[Request]:
    """The requests of moto's log, less those whose user agent contains one of
    ``exclude_agents`` (an emulator's own calls, e.g. the SubscribeToShard
    front's polling: AWS makes those inside the service)."""
    out = []
    for line in lines:
        if not line.strip():
            continue
        entry = json.loads(line)
        if any(agent in entry.get("agent", "") for agent in exclude_agents):
            continue
        out.append(
            Request(
                float(entry["t"]),
                str(entry["service"]),
                str(entry["api"]),
                thread=str(entry.get("agent", "")),
            )
        )
    return out


# ------------------------------------------------------------------ the job's files

# strace -f -ttt: "<tid> <epoch>.<us> <call>(<args>" (the rest may be
# "<unfinished ...>" when another thread's call interleaves).
_STRACE: Final = re.compile(r"^(?:\[pid\s+)?(\d+)\]?\s+(\d+\.\d+)\s+(\w+)\((.*)$")
_QUOTED: Final = re.compile(r'"((?:[^"\\]|\\.)*)"')

# What a file under the instance's directory is, by its path there: first match wins.
PREFIXES: Final = (
    ("checkpoint/state/", "state"),
    ("checkpoint/_lease", "lease"),
    ("checkpoint/_kinesis_ends", "markers"),
    ("checkpoint/_exit", "markers"),
    ("checkpoint/_failures", "markers"),
    ("stop", "markers"),
    ("checkpoint", "checkpoint"),
    ("warehouse/", "table"),
)


def _hadoop_checksum(name: str) -> bool:
    """Hadoop's local file system keeps a side file ``.<name>.crc`` per file
    (ChecksumFileSystem), which S3A does not write. Spark 4.1's own checksum
    of a state file, ``<version>.changelog.crc`` (no leading dot), is an
    object on S3 too, and counts."""
    return name.startswith(".") and name.endswith(".crc")


def prefix_of(relative: str) -> str | None:
    """``checkpoint``, ``state``, ``table/data``, ``table/metadata``, ``lease``
    or ``markers``; None for what has no S3 counterpart (``.crc`` files, the
    SQLite catalog, logs, the job's config)."""
    name = relative.rsplit("/", 1)[-1]
    if _hadoop_checksum(name) or relative.startswith(("catalog.db", "job.", "job-")):
        return None
    for start, prefix in PREFIXES:
        if relative == start.rstrip("/") or relative.startswith(start):
            if prefix == "table":
                return "table/metadata" if "/metadata" in relative else "table/data"
            return prefix
    return None


def _file_calls(call: str, args: str) -> list[tuple[str, str]]:
    """(S3 API, path) for one file system call, from strace's argument text."""
    paths = _QUOTED.findall(args)
    if not paths:
        return []
    if call in ("openat", "open"):
        flags = args.split(",")[2 if call == "openat" else 1] if "," in args else ""
        if "O_DIRECTORY" in flags:
            return [("ListObjectsV2", paths[0])]
        if any(flag in flags for flag in ("O_WRONLY", "O_RDWR", "O_CREAT")):
            return [("PutObject", paths[0])]
        return [("GetObject", paths[0])]
    if call in ("rename", "renameat", "renameat2") and len(paths) >= 2:
        return [("CopyObject", paths[1]), ("DeleteObject", paths[0])]
    if call in ("unlink", "unlinkat", "rmdir"):
        return [("DeleteObject", paths[0])]
    # mkdirs of a directory that exists (every batch's): S3A checks it with a
    # HEAD and writes nothing; S3 has no directories to create.
    if call in ("mkdir", "mkdirat"):
        return [("HeadObject", paths[0])]
    if call in ("stat", "lstat", "newfstatat", "statx", "access", "faccessat", "faccessat2"):
        return [("HeadObject", paths[0])]
    return []


# One Hadoop FileSystem call (exists, getFileStatus, mkdirs) stats the same
# path several times in a row on the local file system (java.io.File asks
# once per attribute); S3A answers it with one HEAD. Repeated stats of one
# path by one thread within this many seconds count once.
STAT_BURST_SEC: Final = 0.05


def from_strace(lines: Iterable[str], root: str) -> list[Request]:
    """The S3 requests the job's file calls under ``root`` stand for."""
    base = root.rstrip("/") + "/"
    out = []
    last_stat: dict[tuple[str, str], float] = {}
    for line in lines:
        match = _STRACE.match(line.strip())
        if match is None:
            continue
        tid, when, call, args = match.groups()
        for api, path in _file_calls(call, args):
            if not path.startswith(base):
                continue
            if api == "HeadObject":
                previous = last_stat.get((tid, path))
                last_stat[(tid, path)] = float(when)
                if previous is not None and float(when) - previous < STAT_BURST_SEC:
                    continue
            prefix = prefix_of(path[len(base) :])
            if prefix is None:
                continue
            out.append(Request(float(when), "s3", api, prefix, tid))
            if path.endswith(".metadata.json") and api in GLUE_FOR_METADATA:
                out.append(Request(float(when), "glue", GLUE_FOR_METADATA[api], "", tid))
    return out


# ------------------------------------------------------------------------ per batch

Key = tuple[str, str, str]  # service, API, prefix


def window(requests: Iterable[Request], start: float, end: float) -> list[Request]:
    """The requests made in ``[start, end)``."""
    return [r for r in requests if start <= r.t < end]


def per_batch(requests: Iterable[Request], batches: int) -> dict[Key, float]:
    """Requests by (service, API, prefix), divided by the batches they served."""
    if batches <= 0:
        raise ValueError(f"batches: {batches}; expected at least one batch in the window")
    counts = Counter((r.service, r.api, r.prefix) for r in requests)
    return {key: counts[key] / batches for key in sorted(counts)}


# Which requests wait for one another on a batch's path (reasoned from the
# code, docs/sizing.md "Requests per batch"): the driver's (the checkpoint's
# offset and commit files, the table's metadata, the catalog, the lease and
# the markers) run one after another; the state store's are made by the
# batch's tasks, one chain per shuffle partition, in parallel; so are the
# table's data files (one chain per task) and Kinesis reads (one per shard).
# CloudWatch's PutMetricData is sent by a background thread, off the path.
# Keyed by (service, prefix) for S3, (service, API) otherwise.
PARALLEL: Final[dict[tuple[str, str], str]] = {
    ("s3", "state"): "partitions",
    ("s3", "table/data"): "partitions",
    ("kinesis", "GetRecords"): "shards",
    ("kinesis", "GetShardIterator"): "shards",
    ("kinesis", "SubscribeToShard"): "shards",
}
OFF_PATH: Final = frozenset({"monitoring"})


def serial(counts: Mapping[Key, float], *, partitions: int, shards: int) -> float:
    """The requests on the batch's critical path: every driver request, plus
    one partition's (or one shard's) share of the parallel ones."""
    total = 0.0
    for (service, api, prefix), count in counts.items():
        if service in OFF_PATH:
            continue
        spread = PARALLEL.get((service, prefix if service == "s3" else api))
        total += count / {"partitions": partitions, "shards": shards}[spread] if spread else count
    return total
