"""Options of the ``python-kinesis`` source, parsed once from Spark's strings.

The names are the awslabs connector's (``job.sources.aws_kinesis``), so one
options dict feeds either reader. An option left out takes the job's default
(``model.config.SourceOptions``), so a direct ``format("python-kinesis")`` user
reads like the job does. Differences from the connector, on purpose:

* ``kinesis.startingPosition`` defaults to ``TRIM_HORIZON`` (the connector
  says ``LATEST``, which silently skips the backlog on a first start), and
  ``kinesis.failOnDataLoss`` to true;
* ``kinesis.endpointUrl`` is optional (boto3 resolves the public endpoint);
* ``kinesis.consumerType`` is ``GetRecords`` (polling) or ``SubscribeToShard``
  (enhanced fan-out through :mod:`job.sources.kinesis_efo`, which needs
  ``kinesis.consumerName``, the registered consumer); any other value is refused.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Final

from job.sources import aws_kinesis as names
from model.config import MIN_FETCH_TIME_SEC, SourceOptions

# The job's source defaults; the reader's shared options start from them.
_JOB: Final = SourceOptions()

RECORDS_PER_FETCH_MAX: Final = 10_000  # GetRecords' own Limit ceiling
FETCH_INTERVAL_MS: Final = "kinesis.getRecords.fetchIntervalMs"
CONNECT_TIMEOUT_SEC: Final = "kinesis.python.connectTimeoutSec"
READ_TIMEOUT_SEC: Final = "kinesis.python.readTimeoutSec"
# Where the reading tasks record each batch's ends (model.kinesis_ends):
# the awslabs connector's option name; the job sets it inside the checkpoint.
METADATA_PATH: Final = "kinesis.metadataPath"
# At most this many tasks per batch (shards beyond it are grouped); the job
# sets Spark's default parallelism, the executors' total cores.
READ_TASKS: Final = "kinesis.python.readTasks"
# An S3 endpoint for an s3:// metadata path (the job's s3_endpoint_url).
S3_ENDPOINT_URL: Final = "kinesis.python.s3EndpointUrl"
# The stack's enhanced fan-out consumer by ARN (model.config.SourceOptions.consumer_arn):
# subscribed through, never registered. python-kinesis only.
CONSUMER_ARN: Final = "kinesis.python.consumerArn"

_DURATION = re.compile(r"^\s*(\d+)\s*(ms|s|m|min|h)?\s*$")
_UNIT_MS: Final = {None: 1, "ms": 1, "s": 1000, "m": 60_000, "min": 60_000, "h": 3_600_000}


@dataclass(frozen=True)
class StartingPosition:
    """Where a shard with no stored offset starts: ``kind`` is TRIM_HORIZON,
    LATEST or AT_TIMESTAMP (then ``timestamp`` is epoch seconds)."""

    kind: str
    timestamp: float | None = None


@dataclass(frozen=True)
class ReaderOptions:
    """The reader's options; those the job config also has default to its values."""

    stream_name: str
    region: str
    metadata_path: str = ""
    endpoint_url: str | None = None
    starting_position: StartingPosition = StartingPosition(_JOB.starting_position)
    describe_shard_interval_ms: int = _JOB.describe_shard_interval_sec * 1000
    max_fetch_records_per_shard: int = _JOB.max_fetch_records_per_shard
    max_fetch_time_per_shard_sec: int = _JOB.max_fetch_time_per_shard_sec
    fail_on_data_loss: bool = _JOB.fail_on_data_loss
    records_per_fetch: int = RECORDS_PER_FETCH_MAX
    fetch_interval_ms: int = 200
    client_num_retries: int = 5
    client_retry_interval_ms: int = 1_000
    client_max_retry_interval_ms: int = 10_000
    connect_timeout_sec: int = 5
    read_timeout_sec: int = 15
    # GetRecords (polling) or SubscribeToShard (enhanced fan-out through the
    # consumer named consumer_name, registered on the stream).
    consumer_type: str = "GetRecords"
    consumer_name: str | None = None
    # The consumer the stack owns; when set it is only described, never registered.
    consumer_arn: str | None = None
    read_tasks: int | None = None
    s3_endpoint_url: str | None = None


def parse_duration_ms(option: str, value: str) -> int:
    """A Spark time string (``"30s"``, ``"100ms"``, ``"1m"``; bare = ms) in ms."""
    match = _DURATION.match(value)
    if match is None:
        raise ValueError(f"{option}: {value!r} is not a duration such as 500ms, 30s or 1m")
    return int(match.group(1)) * _UNIT_MS[match.group(2)]


def parse_starting_position(value: str) -> StartingPosition:
    """``TRIM_HORIZON``, ``EARLIEST`` (its alias), ``LATEST`` or
    ``AT_TIMESTAMP <ISO-8601 with offset>``, as the connector spells them."""
    text = value.strip()
    upper = text.upper()
    if upper in ("TRIM_HORIZON", "EARLIEST"):
        return StartingPosition("TRIM_HORIZON")
    if upper == "LATEST":
        return StartingPosition("LATEST")
    if upper.startswith("AT_TIMESTAMP"):
        stamp = text[len("AT_TIMESTAMP") :].strip()
        try:
            moment = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
        except ValueError:
            moment = None
        if moment is None or moment.tzinfo is None:
            raise ValueError(
                f"{names.STARTING_POSITION}: {value!r} needs an ISO-8601 time with an "
                "offset, e.g. AT_TIMESTAMP 2023-08-30T19:00:05Z"
            )
        return StartingPosition("AT_TIMESTAMP", moment.timestamp())
    raise ValueError(
        f"{names.STARTING_POSITION}: {value!r} is not one of TRIM_HORIZON, EARLIEST, "
        "LATEST, AT_TIMESTAMP <time>"
    )


def _int(raw: Mapping[str, str], option: str, default: int, minimum: int = 1) -> int:
    value = raw.get(option.lower())
    if value is None:
        return default
    try:
        number = int(value)
    except ValueError:
        number = minimum - 1
    if number < minimum:
        raise ValueError(f"{option}: {value!r} must be an integer >= {minimum}")
    return number


def _bool(raw: Mapping[str, str], option: str, default: bool) -> bool:
    value = raw.get(option.lower())
    if value is None:
        return default
    if value.strip().lower() not in ("true", "false"):
        raise ValueError(f"{option}: {value!r} must be true or false")
    return value.strip().lower() == "true"


CONSUMER_TYPES: Final = ("GetRecords", "SubscribeToShard")


def parse_consumer(raw: Mapping[str, str]) -> tuple[str, str | None]:
    """``kinesis.consumerType`` in its canonical spelling, and the consumer name
    enhanced fan-out subscribes through (required with ``SubscribeToShard``,
    ignored with ``GetRecords``). ``raw``'s keys are lower-cased."""
    value = raw.get(names.CONSUMER_TYPE.lower(), "GetRecords").strip()
    canonical = {kind.lower(): kind for kind in CONSUMER_TYPES}.get(value.lower())
    if canonical is None:
        raise ValueError(
            f"{names.CONSUMER_TYPE}: {value!r} is not one of {', '.join(CONSUMER_TYPES)}"
        )
    if canonical == "GetRecords":
        return canonical, None
    name = (raw.get(names.CONSUMER_NAME.lower()) or "").strip()
    if not name:
        raise ValueError(
            f"{names.CONSUMER_NAME}: required with {names.CONSUMER_TYPE} SubscribeToShard "
            "(the enhanced fan-out consumer registered on the stream)"
        )
    return canonical, name


def parse_options(options: Mapping[str, str]) -> ReaderOptions:
    """Validated reader options; a bad one raises ValueError naming it.

    Spark hands over whatever ``.option()`` calls a user made, so the rules of
    the job's config model are checked again here for the options it shares
    (e.g. the 10 s fetch-time minimum); the job's own dict already obeys them.
    """
    raw = {key.lower(): str(value) for key, value in options.items()}
    stream = raw.get(names.STREAM_NAME.lower())
    if not stream:
        raise ValueError(f"{names.STREAM_NAME}: required (the Kinesis stream to read)")
    region = raw.get(names.REGION.lower()) or raw.get(names.KINESIS_REGION.lower())
    if not region:
        raise ValueError(f"{names.REGION}: required (e.g. us-east-1)")
    consumer_type, consumer_name = parse_consumer(raw)
    metadata = raw.get(METADATA_PATH.lower())
    if not metadata:
        raise ValueError(
            f"{METADATA_PATH}: required (a directory or s3:// prefix inside the query's "
            "checkpoint location, where the reading tasks record each batch's end)"
        )
    tasks = raw.get(READ_TASKS.lower())
    base = ReaderOptions(
        stream_name=stream,
        region=region,
        metadata_path=metadata,
        consumer_type=consumer_type,
        consumer_name=consumer_name,
        consumer_arn=(raw.get(CONSUMER_ARN.lower()) or None)
        if consumer_type == "SubscribeToShard"
        else None,
    )
    per_fetch = _int(raw, names.RECORDS_PER_FETCH, base.records_per_fetch)
    if per_fetch > RECORDS_PER_FETCH_MAX:
        raise ValueError(f"{names.RECORDS_PER_FETCH}: {per_fetch} exceeds {RECORDS_PER_FETCH_MAX}")
    position = raw.get(names.STARTING_POSITION.lower())
    interval = raw.get(names.DESCRIBE_SHARD_INTERVAL.lower())
    return replace(
        base,
        endpoint_url=raw.get(names.ENDPOINT_URL.lower()) or None,
        starting_position=(
            base.starting_position if position is None else parse_starting_position(position)
        ),
        describe_shard_interval_ms=(
            base.describe_shard_interval_ms
            if interval is None
            else parse_duration_ms(names.DESCRIBE_SHARD_INTERVAL, interval)
        ),
        max_fetch_records_per_shard=_int(
            raw, names.MAX_FETCH_RECORDS_PER_SHARD, base.max_fetch_records_per_shard
        ),
        max_fetch_time_per_shard_sec=_int(
            raw,
            names.MAX_FETCH_TIME_PER_SHARD_SEC,
            base.max_fetch_time_per_shard_sec,
            minimum=MIN_FETCH_TIME_SEC,
        ),
        fail_on_data_loss=_bool(raw, names.FAIL_ON_DATA_LOSS, base.fail_on_data_loss),
        records_per_fetch=per_fetch,
        fetch_interval_ms=_int(raw, FETCH_INTERVAL_MS, base.fetch_interval_ms, minimum=0),
        client_num_retries=_int(raw, names.CLIENT_NUM_RETRIES, base.client_num_retries, minimum=0),
        client_retry_interval_ms=_int(
            raw, names.CLIENT_RETRY_INTERVALS_MS, base.client_retry_interval_ms, minimum=0
        ),
        client_max_retry_interval_ms=_int(
            raw, names.CLIENT_MAX_RETRY_INTERVAL_MS, base.client_max_retry_interval_ms, minimum=0
        ),
        connect_timeout_sec=_int(raw, CONNECT_TIMEOUT_SEC, base.connect_timeout_sec),
        read_timeout_sec=_int(raw, READ_TIMEOUT_SEC, base.read_timeout_sec),
        read_tasks=None if tasks is None else _int(raw, READ_TASKS, 1),
        s3_endpoint_url=raw.get(S3_ENDPOINT_URL.lower()) or None,
    )
