"""The failure producer's settings, made on the driver: where the brokers are
(as configured, or looked up from the MSK cluster), how the producer
authenticates (MSK IAM's OAUTHBEARER token) and the librdkafka configuration
every producer is built from. :class:`KafkaSettings` is picklable: the
executors' delivery (:mod:`job.sinks.kafka`) gets it with each task and
builds its producer there.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from model import aws_clients
from model.config import JobConfig, KafkaOptions
from model.failure_limits import DEFAULT_MAX_MESSAGE_BYTES, FailureLimits
from model.failure_store import FailureStoreSettings


@dataclass(frozen=True)
class KafkaSettings:
    """Everything an executor needs to produce (picklable: no clients inside)."""

    bootstrap_servers: str
    topic: str
    security: str
    region: str
    instance_id: str
    delivery_timeout_ms: int
    request_timeout_ms: int
    flush_timeout_sec: int
    # librdkafka's message.max.bytes and batch.size (model.failure_limits).
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES
    # Where originals too large for the topic go (None: nowhere; such a record
    # then fails the task, as before the claim-check store existed).
    store: FailureStoreSettings | None = None

    @classmethod
    def for_job(cls, config: JobConfig, bootstrap_servers: str) -> KafkaSettings:
        """The job's settings once its brokers are known (resolved from the MSK
        cluster on AWS, ``kafka.bootstrap_servers`` locally)."""
        settings = cls.from_options(
            config.kafka,
            region=config.region,
            instance_id=config.instance_id,
            bootstrap_servers=bootstrap_servers,
        )
        store = FailureStoreSettings(
            location=config.failure_store_uri,
            region=config.region,
            endpoint_url=config.s3_endpoint_url,
        )
        return replace(settings, store=store)

    @classmethod
    def from_options(
        cls, options: KafkaOptions, *, region: str, instance_id: str, bootstrap_servers: str
    ) -> KafkaSettings:
        return cls(
            bootstrap_servers=bootstrap_servers,
            topic=options.topic,
            security=options.security,
            region=region,
            instance_id=instance_id,
            delivery_timeout_ms=options.delivery_timeout_ms,
            request_timeout_ms=options.request_timeout_ms,
            flush_timeout_sec=options.flush_timeout_sec,
            max_message_bytes=options.max_message_bytes,
        )


def resolve_bootstrap_servers(
    options: KafkaOptions, *, region: str, client_factory: Callable[..., Any] | None = None
) -> str:
    """``bootstrap_servers`` as given, or the IAM brokers of ``cluster_arn`` (MSK
    only knows them after the cluster exists, so they cannot be in the config)."""
    if options.bootstrap_servers:
        return options.bootstrap_servers
    if not options.cluster_arn:
        raise ValueError("kafka: set bootstrap_servers or cluster_arn")
    if client_factory is None:

        def client_factory(*, region_name: str) -> Any:
            return aws_clients.client("kafka", aws_clients.MSK_LOOKUP, region=region_name)

    kafka = client_factory(region_name=region)
    brokers = kafka.get_bootstrap_brokers(ClusterArn=options.cluster_arn)
    key = (
        "BootstrapBrokerStringSaslIam" if options.security == "MSK_IAM" else "BootstrapBrokerString"
    )
    value = brokers.get(key)
    if not value:
        raise ValueError(
            f"kafka.cluster_arn: {options.cluster_arn} exposes no {key} "
            f"(security={options.security}); enable that auth on the cluster"
        )
    return str(value)


def msk_iam_token(region: str) -> tuple[str, float]:
    """OAUTHBEARER callback for MSK IAM: a signed token and its expiry (seconds)."""
    # optional: the signer is the job's dependency (job/requirements.lock), not the
    # model's, which imports where only the CDK packages and boto3 are installed
    from aws_msk_iam_sasl_signer import MSKAuthTokenProvider  # optional: MSK IAM only

    token, expiry_ms = MSKAuthTokenProvider.generate_auth_token(region)
    return str(token), float(expiry_ms) / 1000.0


def producer_config(settings: KafkaSettings) -> dict[str, Any]:
    """Idempotent, acks=all, every wait bounded (delivery, request, socket);
    messages and batches no larger than the topic takes (model.failure_limits)."""
    limits = FailureLimits(settings.max_message_bytes)
    conf: dict[str, Any] = {
        "bootstrap.servers": settings.bootstrap_servers,
        "enable.idempotence": True,
        "acks": "all",
        "delivery.timeout.ms": settings.delivery_timeout_ms,
        "request.timeout.ms": min(settings.request_timeout_ms, settings.delivery_timeout_ms),
        "socket.timeout.ms": min(settings.request_timeout_ms, settings.delivery_timeout_ms),
        "linger.ms": 20,
        "compression.type": "lz4",
        # A batch never grows past one message's limit, so the topic's
        # max.message.bytes (this + the framing allowance) always takes it.
        "message.max.bytes": limits.producer_message_max_bytes,
        "batch.size": limits.producer_message_max_bytes,
        "client.id": f"failures-{settings.instance_id}",
    }
    if settings.security == "MSK_IAM":
        region = settings.region
        conf.update(
            {
                "security.protocol": "SASL_SSL",
                "sasl.mechanism": "OAUTHBEARER",
                "oauth_cb": lambda _config: msk_iam_token(region),
            }
        )
    else:
        conf["security.protocol"] = "PLAINTEXT"
    return conf
