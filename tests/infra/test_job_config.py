"""The InstanceConfig → JobConfig mapping shared by the CDK app and the local run."""

from __future__ import annotations

from typing import Any

import pytest

from infra.config import InstanceConfig, load_instances, read_cdk_context
from infra.job_config import job_config_for, source_choice
from model.config import ConfigError, JobConfig, JobSettings, KafkaOptions, SourceSettings
from tests.infra.conftest import EXAMPLE_CDK_JSON


def _instances() -> dict[str, InstanceConfig]:
    found = load_instances(read_cdk_context(EXAMPLE_CDK_JSON))
    return {i.instance_id: i for i in found}


def _local(instance_id: str, **kwargs: Any) -> JobConfig:
    """The instance's job config as the local run builds it (a broker, no MSK)."""
    return job_config_for(
        _instances()[instance_id],
        checkpoint_location="/tmp/cp",
        kafka_bootstrap_servers="127.0.0.1:9092",
        **kwargs,
    )


def test_example_instance_maps_names_and_source_options() -> None:
    payments = _instances()["payments-ap-northeast-2"]
    config = job_config_for(
        payments,
        checkpoint_location="s3://bucket/checkpoints/payments",
        kafka_cluster_arn="arn:aws:kafka:ap-northeast-2:111111111111:cluster/c/abc",
        kafka_security="MSK_IAM",
    )
    assert config.stream_name == "streaming-payments-ap-northeast-2"
    assert config.database == "streaming_payments_ap_northeast_2"
    assert config.kafka.topic == "streaming.payments.ap-northeast-2.failures"
    assert config.kafka.security == "MSK_IAM"
    assert config.trigger_interval_sec == 5
    # Enhanced fan-out through the release's default reader (python-kinesis).
    assert config.source.format == "python-kinesis"
    assert config.source.consumer_type == "SubscribeToShard"
    assert config.source.consumer_name == "payments-ap-northeast-2-job"
    assert config.source.fail_on_data_loss is True
    assert JobConfig.from_dict(config.to_dict()) == config


def test_local_mapping_points_every_client_at_the_emulator() -> None:
    config = _local(
        "orders-eu-west-1",
        aws_endpoint_url="http://127.0.0.1:5000",
        source_format="python-kinesis",
    )
    assert config.kinesis_endpoint_url == "http://127.0.0.1:5000"
    assert config.s3_endpoint_url == "http://127.0.0.1:5000"
    assert config.metrics.endpoint_url == "http://127.0.0.1:5000"
    assert config.source.consumer_name is None


def test_the_local_run_reads_an_efo_instance_through_its_consumer() -> None:
    """The local run's Python source subscribes like the cluster's does (the
    harness serves SubscribeToShard): same consumer type, same name."""
    config = _local("payments-ap-northeast-2", source_format="python-kinesis")
    assert config.source.consumer_type == "SubscribeToShard"
    assert config.source.consumer_name == "payments-ap-northeast-2-job"


def test_left_out_keywords_take_the_job_models_defaults() -> None:
    """job_config_for has no defaults of its own: what a caller leaves out is
    the job model's (model/config.py), the one place a default is declared."""
    config = _local("orders-eu-west-1")
    defaults = KafkaOptions(topic="t", bootstrap_servers="b:1")
    assert config.kafka.security == defaults.security == "PLAINTEXT"
    assert config.database_location is None
    assert config.stop_marker_path is None


def test_kafka_needs_exactly_one_of_brokers_or_cluster() -> None:
    orders = _instances()["orders-eu-west-1"]
    with pytest.raises(ConfigError, match="exactly one of bootstrap_servers"):
        job_config_for(orders, checkpoint_location="/tmp/cp")


def test_every_instance_job_setting_reaches_the_job() -> None:
    """JobSettings is the job's own model: each field the instance chose arrives unchanged."""
    context = read_cdk_context(EXAMPLE_CDK_JSON)
    streaming = context["streaming"]
    entry = {
        "domain": "orders",
        "region": "eu-west-1",
        "job": {
            "trigger_interval_sec": 7,
            "source": {
                "starting_position": "LATEST",
                "max_fetch_records_per_shard": 123,
                "max_fetch_time_per_shard_sec": 11,
                "describe_shard_interval_sec": 4,
                "format": "aws-kinesis",
            },
        },
    }
    (instance,) = load_instances(
        {"streaming": {"defaults": streaming["defaults"], "instances": [entry]}}
    )
    config = job_config_for(instance, checkpoint_location="/tmp/cp", kafka_bootstrap_servers="b:1")
    for name in JobSettings.model_fields.keys() - {"source"}:
        assert getattr(config, name) == getattr(instance.job, name), name
    source = {name: getattr(config.source, name) for name in SourceSettings.model_fields}
    assert (
        source
        == instance.job.source.model_dump()
        == entry["job"]["source"] | {"consumer_type": "GetRecords"}
    )
    assert config.trigger_interval_sec == 7


def test_the_release_default_reader_runs_unless_the_instance_chooses_one() -> None:
    """emr-spark-8.1.0 runs the Python reader by default (the connector's Spark 4.1
    build is unreleased); the job config carries why, for the job's start-up log."""
    orders = _instances()["orders-eu-west-1"]
    assert orders.job.source.format is None
    config = job_config_for(orders, checkpoint_location="s3://b/cp", kafka_bootstrap_servers="b:1")
    assert config.source.format == "python-kinesis"
    assert config.source.format_reason.startswith("emr-spark-8.1.0's default: the awslabs")
    payments_reader, why = source_choice(_instances()["payments-ap-northeast-2"])
    assert payments_reader == "python-kinesis"
    assert "enhanced fan-out through SubscribeToShard" in why


@pytest.mark.parametrize("reader", [None, "python-kinesis", "aws-kinesis"])
def test_enhanced_fan_out_runs_with_either_reader(reader: str | None) -> None:
    """SubscribeToShard is valid with the release's default python-kinesis
    and with the connector; the consumer is the instance's either way."""
    context = read_cdk_context(EXAMPLE_CDK_JSON)
    source: dict[str, str] = {"consumer_type": "SubscribeToShard"}
    if reader is not None:
        source["format"] = reader
    entry = {"domain": "orders", "region": "eu-west-1", "job": {"source": source}}
    (instance,) = load_instances(
        {"streaming": {"defaults": context["streaming"]["defaults"], "instances": [entry]}}
    )
    config = job_config_for(instance, checkpoint_location="/tmp/cp", kafka_bootstrap_servers="b:1")
    assert config.source.format == (reader or "python-kinesis")
    assert config.source.consumer_type == "SubscribeToShard"
    assert config.source.consumer_name == "orders-eu-west-1-job"


def test_mapping_error_names_the_job_field() -> None:
    orders = _instances()["orders-eu-west-1"]
    with pytest.raises(ConfigError) as caught:
        job_config_for(orders, checkpoint_location="", kafka_bootstrap_servers="b:1")
    assert str(caught.value) == "checkpoint_location: bad value ''; allowed: a non-empty string"
