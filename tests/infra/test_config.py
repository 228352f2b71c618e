"""Invalid instance declarations stop synth before anything is built, naming
the instance, the field, the bad value and what is allowed."""

from __future__ import annotations

from typing import Any

import pytest

from emr.releases import EMR_REGIONS, EMR_REGIONS_PAGE, release_for
from infra.config import (
    InstanceConfig,
    InstanceConfigError,
    load_instances,
    read_cdk_context,
    refuse_shared_tls,
    runs_an_emr_cluster,
)
from infra.config_sections import default_shard_quota
from model import contract
from model.config import MIN_FETCH_TIME_SEC, JobSettings, SourceSettings
from tests.infra.config_cases import config_error, context_of, entry_error, instance_entry
from tests.infra.conftest import EXAMPLE_CDK_JSON


def test_shipped_example_parses_into_two_domains_and_two_regions() -> None:
    instances = load_instances(read_cdk_context(EXAMPLE_CDK_JSON))
    assert len({i.domain for i in instances}) >= 2
    assert len({i.region for i in instances}) >= 2
    orders = instances[0]
    assert orders.stack_name == contract.stack_name("orders", "ap-northeast-2")
    assert orders.stream_name == contract.stream_name("orders", "ap-northeast-2")
    assert orders.database_name == contract.database_name("orders", "ap-northeast-2")
    assert orders.failure_topic_name == contract.failure_topic_name("orders", "ap-northeast-2")
    assert orders.stream.shard_count == 4  # instance entry deep-merged over defaults
    assert orders.emr.release_label == "emr-spark-8.1.0"  # from defaults
    assert orders.job.source.starting_position == "TRIM_HORIZON"


def test_defaults_apply_when_the_context_omits_them() -> None:
    (config,) = load_instances(
        context_of(
            instance_entry(emr={"tls_certificates_s3_uri": "s3://certs-bucket/a.zip"}), defaults={}
        )
    )
    assert config.emr.release_label == "emr-spark-8.1.0"
    assert config.stream.on_demand
    assert config.removal_policy == "RETAIN"
    # The failure topic's durable defaults: a broker down loses no acknowledged write.
    assert config.kafka.broker_count == 3
    assert config.kafka.topic_replication_factor == 3
    assert config.kafka.min_insync_replicas == 2


def test_unknown_field() -> None:
    message = entry_error(stream={"shards": 2})
    assert "instances[0] (orders/eu-west-1)" in message
    assert "stream.shards" in message
    assert "unknown field" in message
    assert "retention_hours, shard_count" in message


def test_unknown_top_level_field_in_defaults() -> None:
    message = config_error(context_of(instance_entry(), defaults={"colour": "blue"}))
    assert "field colour: unknown field" in message


def test_missing_field() -> None:
    message = config_error(context_of({"domain": "orders"}))
    assert "instances[0] (orders/None)" in message
    assert "field region: missing required field" in message


def test_duplicate_domain_and_region() -> None:
    message = config_error(context_of(instance_entry(), instance_entry(stream={"shard_count": 2})))
    assert "instances[1]" in message
    assert "duplicate value 'orders'/'eu-west-1'" in message
    assert "instances[0]" in message


def test_fetch_time_below_the_connector_minimum() -> None:
    context = context_of(instance_entry(job={"source": {"max_fetch_time_per_shard_sec": 5}}))
    message = config_error(context)
    assert "field job.source.max_fetch_time_per_shard_sec: bad value 5" in message
    assert "an integer >= 10" in message


def test_msk_cluster_in_another_region() -> None:
    arn = "arn:aws:kafka:us-east-1:123456789012:cluster/failures/0b1c2d3e-1111-2222"
    message = entry_error(kafka={"cluster_arn": arn})
    assert "a cluster in the instance's region eu-west-1" in message


def test_bad_removal_policy() -> None:
    message = entry_error(removal_policy="SNAPSHOT")
    assert "field removal_policy: bad value 'SNAPSHOT'; allowed: RETAIN | DESTROY" in message


def test_missing_tls_certificates() -> None:
    message = config_error(context_of(instance_entry(), defaults={}))
    assert "field emr.tls_certificates_s3_uri: missing required field" in message


def test_missing_streaming_section() -> None:
    with pytest.raises(InstanceConfigError, match=r"context\.streaming: missing"):
        load_instances({})


# ---------------------------------------------------------------- one model with the job's


def test_job_section_is_the_job_configs_own_model() -> None:
    """No second declaration of the job's options: same class, same defaults."""
    assert InstanceConfig.model_fields["job"].annotation is JobSettings
    (config,) = load_instances(context_of(instance_entry()))
    assert config.job == JobSettings()
    assert config.job.source.max_fetch_time_per_shard_sec == MIN_FETCH_TIME_SEC


def test_unknown_job_source_field_lists_the_job_settings() -> None:
    message = entry_error(job={"source": {"fail_on_data_loss": False}})
    assert "field job.source.fail_on_data_loss: unknown field; allowed: " in message
    assert ", ".join(sorted(SourceSettings.model_fields)) in message


def test_shipped_defaults_restate_no_model_default() -> None:
    """cdk.json's defaults hold only what the examples choose; the models hold the rest."""
    shipped = read_cdk_context(EXAMPLE_CDK_JSON)["streaming"]["defaults"]
    # The TLS URI has no model default; the placeholder stands in for "none".
    placeholder = "s3://placeholder-bucket/certificates.zip"
    (bare,) = load_instances(
        context_of(instance_entry(emr={"tls_certificates_s3_uri": placeholder}), defaults={})
    )
    model_defaults = bare.model_dump()

    def leaves(tree: dict[str, Any], prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
        found: list[tuple[str, ...]] = []
        for key, value in tree.items():
            path = (*prefix, key)
            found += leaves(value, path) if isinstance(value, dict) else [path]
        return found

    paths = leaves(shipped)
    assert paths, "the shipped defaults block is empty; drop this test with it"
    for path in paths:
        shipped_value, default = shipped, model_defaults
        for key in path:
            shipped_value, default = shipped_value[key], default[key]
        assert shipped_value != default, f"{'.'.join(path)} restates the model default"


def test_float_field_takes_an_integer_but_not_a_bool_or_string() -> None:
    (config,) = load_instances(context_of(instance_entry(alarms={"scheduling_delay_ratio": 1})))
    assert config.alarms.scheduling_delay_ratio == 1.0
    for bad in (True, "0.5"):
        message = entry_error(alarms={"scheduling_delay_ratio": bad})
        assert f"alarms.scheduling_delay_ratio: bad value {bad!r}; allowed: 0 < ratio <= 1" in (
            message
        )


def test_every_bad_field_of_the_instance_is_reported() -> None:
    message = config_error(
        context_of(instance_entry(stream={"retention_hours": 12}, kafka={"topic_partitions": 0}))
    )
    lines = message.splitlines()
    assert lines == [
        "instance instances[0] (orders/eu-west-1): field stream.retention_hours: "
        "bad value 12; allowed: an integer >= 24 and <= 8760",
        "instance instances[0] (orders/eu-west-1): field kafka.topic_partitions: "
        "bad value 0; allowed: an integer > 0",
    ]


# ------------------------------------------------ what once passed when it should not


def test_a_shard_count_above_the_regions_default_quota_is_refused() -> None:
    """Item 3: the bound is the cited default Kinesis shard quota (20,000 in
    eu-west-1, 1,000 where the page says "1,000 or 6,000")."""
    assert default_shard_quota("eu-west-1") == 20_000
    assert default_shard_quota("ap-northeast-2") == 1_000
    message = entry_error(stream={"shard_count": 100_000})
    assert message.startswith(
        "instance instances[0] (orders/eu-west-1): field stream.shard_count: bad value 100000; "
        "allowed: 1..20000: the default Kinesis shard quota of eu-west-1 ("
        "https://docs.aws.amazon.com/streams/latest/dev/service-sizes-and-limits.html)"
    )
    assert "an account with a higher quota sets stream.shard_quota to it" in message
    seoul = instance_entry(region="ap-northeast-2", stream={"shard_count": 1_001})
    assert "allowed: 1..1000" in config_error(context_of(seoul))
    (config,) = load_instances(context_of(instance_entry(stream={"shard_count": 20_000})))
    assert config.stream.shard_count == 20_000


def test_the_accounts_shard_quota_raises_the_bound() -> None:
    raised = instance_entry(stream={"shard_count": 30_000, "shard_quota": 40_000})
    (config,) = load_instances(context_of(raised))
    assert config.stream.shard_count == 30_000
    over = instance_entry(stream={"shard_count": 50_000, "shard_quota": 40_000})
    assert "bad value 50000; allowed: 1..40000: stream.shard_quota" in config_error(
        context_of(over)
    )


@pytest.mark.parametrize("region", ["ap-northeast-9", "eu-west-9", "mars-north-1"])
def test_a_region_where_emr_does_not_exist_is_refused(region: str) -> None:
    """Item 3: regions come from the cited list (emr/releases.py)."""
    message = entry_error(region=region)
    assert message == (
        f"instance instances[0] (orders/{region}): field region: bad value {region!r}; "
        "allowed: a Region where Amazon EMR runs, such as eu-west-1 "
        f"({EMR_REGIONS_PAGE}; emr/releases.py EMR_REGIONS)"
    )


def test_eu_west_9_is_blamed_on_the_region_not_on_the_cluster_arn() -> None:
    arn = "arn:aws:kafka:eu-west-1:123456789012:cluster/failures/0b1c2d3e-1111-2222"
    message = config_error(
        context_of(instance_entry(region="eu-west-9", kafka={"cluster_arn": arn}))
    )
    (line,) = message.splitlines()
    assert "field region: bad value 'eu-west-9'" in line
    assert "cluster_arn" not in line


def test_every_listed_region_passes_and_the_release_names_its_regions() -> None:
    assert "ap-northeast-2" in EMR_REGIONS and "eu-west-1" in EMR_REGIONS
    assert release_for("emr-spark-8.1.0").regions == EMR_REGIONS
    for region in EMR_REGIONS:
        assert load_instances(context_of(instance_entry(region=region)))[0].region == region


def test_one_tls_zip_shared_by_two_instances_is_refused() -> None:
    """Item 5: the zip holds a private key; each instance gets its own."""
    shared = {"tls_certificates_s3_uri": "s3://certs-bucket/one.zip"}
    message = config_error(
        context_of(
            instance_entry(emr=shared),
            instance_entry(domain="payments", emr=shared),
            instance_entry(domain="refunds", region="ap-northeast-2", emr=shared),
            defaults={},
        )
    )
    assert message.splitlines() == [
        f"instance {other}: field emr.tls_certificates_s3_uri: bad value "
        "'s3://certs-bucket/one.zip', already orders-eu-west-1's; allowed: a zip of its own, "
        f'`make certs INSTANCE={other}` (docs/infra.md, "TLS certificates")'
        for other in ("payments-eu-west-1", "refunds-ap-northeast-2")
    ]
    own = [
        instance_entry(domain=d, emr={"tls_certificates_s3_uri": f"s3://certs-bucket/{d}.zip"})
        for d in ("orders", "payments")
    ]
    assert len(load_instances(context_of(*own, defaults={}))) == 2


def test_the_shared_tls_check_looks_only_at_instances_with_an_emr_cluster() -> None:
    """An instance without a cluster (``compute`` other than emr) loads no zip."""
    shared = {"tls_certificates_s3_uri": "s3://certs-bucket/one.zip"}
    a, b = load_instances(
        context_of(
            instance_entry(emr={"tls_certificates_s3_uri": "s3://certs-bucket/a.zip"}),
            instance_entry(
                domain="payments", emr={"tls_certificates_s3_uri": "s3://certs-bucket/b.zip"}
            ),
            defaults={},
        )
    )
    b_without_cluster = _NoCluster(b)
    assert runs_an_emr_cluster(a) and not runs_an_emr_cluster(b_without_cluster)  # type: ignore[arg-type]
    same_a = a.model_copy(update={"emr": a.emr.model_copy(update=shared)})
    same_b = b.model_copy(update={"emr": b.emr.model_copy(update=shared)})
    refuse_shared_tls([same_a, _NoCluster(same_b)])  # type: ignore[list-item]
    with pytest.raises(InstanceConfigError, match="already orders-eu-west-1's"):
        refuse_shared_tls([same_a, same_b])


class _NoCluster:
    """An instance as one with ``"compute": "serverless"`` looks to the check."""

    compute = "serverless"

    def __init__(self, config: InstanceConfig) -> None:
        self.emr = config.emr
        self.instance_id = config.instance_id


@pytest.mark.parametrize("extra", [{}, {"size": "smal"}, {"emr": {"core_instance_count": 0}}])
def test_an_unknown_compute_is_the_one_error_reported(extra: dict[str, Any]) -> None:
    """The root error first and alone: not the TLS zip an EMR cluster would
    need, nor the other fields' errors."""
    message = entry_error(compute="serverles", **extra)
    assert message == (
        "instance instances[0] (orders/eu-west-1): field compute: bad value 'serverles'; "
        "allowed: emr | serverless"
    )


def test_a_latency_alarm_a_healthy_job_cannot_meet_is_refused_naming_trigger_and_fixed_cost() -> (
    None
):
    """A record may wait a whole trigger for its batch, then the batch's fixed
    cost (3 s serverless): a 30 s alarm holds a 20 s trigger, not a 30 s one."""
    light = {"compute": "serverless", "alarms": {"end_to_end_latency_ms": 30_000}}
    (held,) = load_instances(context_of(instance_entry(**light, job={"trigger_interval_sec": 20})))
    assert held.alarms.end_to_end_latency_ms == 30_000
    message = entry_error(**light, job={"trigger_interval_sec": 30})
    (line,) = message.splitlines()
    assert "alarms.end_to_end_latency_ms" in line and "30000" in line
    assert "above 33,000 ms" in line and "job.trigger_interval_sec (30 s)" in line
