"""The enhanced fan-out consumer the ``python-kinesis`` source subscribes
through (:mod:`job.sources.kinesis_efo` reads shards with it).

Who owns the consumer: on AWS the stack (``AWS::Kinesis::StreamConsumer`` in
infra/constructs/stream.py, deleted with the stack), whose ARN reaches the job
in its config (``source.consumer_arn``, option ``kinesis.python.consumerArn``):
:func:`ensure_consumer` only describes it and waits for it to be ACTIVE,
never registers one. Locally the harness registers it on moto as the stack
would and passes the ARN the same way (local/harness.py). Only a direct
``format("python-kinesis")`` user without an ARN gets the consumer named
``kinesis.consumerName`` registered by :func:`ensure_consumer`.

A consumer "can't read data while in the CREATING or DELETING states"
(https://docs.aws.amazon.com/kinesis/latest/APIReference/API_Consumer.html);
a new one is CREATING and becomes ACTIVE later, so :func:`ensure_consumer`
polls DescribeStreamConsumer, bounded.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from functools import partial
from typing import Any, Final

from job.sources.kinesis_fetch import Backoff, call_with_backoff, error_code, make_client
from job.sources.kinesis_options import ReaderOptions, parse_options

# How long ensure_consumer waits for a consumer to become ACTIVE.
CONSUMER_ACTIVE_TIMEOUT_SEC: Final = 120.0
CONSUMER_POLL_SEC: Final = 1.0


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
