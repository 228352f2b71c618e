"""Invalid instance declarations stop synth before anything is built, naming
the instance, the field, the bad value and what is allowed."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from infra.config import (
    DEFAULT_KAFKA_VERSION,
    KAFKA_END_OF_SUPPORT,
    InstanceConfig,
    InstanceConfigError,
    default_shard_quota,
    load_instances,
    read_cdk_context,
    refuse_shared_tls,
    runs_an_emr_cluster,
)
from infra.releases import EMR_REGIONS, EMR_REGIONS_PAGE, release_for
from model import contract
from model.config import MIN_FETCH_TIME_SEC, JobSettings, SourceSettings
from tests.infra.conftest import EXAMPLE_CDK_JSON


def _context(*instances: dict[str, Any], defaults: dict[str, Any] | None = None) -> dict[str, Any]:
    base = read_cdk_context(EXAMPLE_CDK_JSON)["streaming"]["defaults"]
    return {
        "streaming": {
            "defaults": copy.deepcopy(base if defaults is None else defaults),
            "instances": list(instances),
        }
    }


def _instance(**overrides: Any) -> dict[str, Any]:
    entry: dict[str, Any] = {"domain": "orders", "region": "eu-west-1"}
    entry.update(overrides)
    return entry


def _error(context: dict[str, Any]) -> str:
    with pytest.raises(InstanceConfigError) as caught:
        load_instances(context)
    return str(caught.value)


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
        _context(_instance(emr={"tls_certificates_s3_uri": "s3://certs-bucket/a.zip"}), defaults={})
    )
    assert config.emr.release_label == "emr-spark-8.1.0"
    assert config.stream.on_demand
    assert config.removal_policy == "RETAIN"
    # The failure topic's durable defaults (issue 10, item 6).
    assert config.kafka.broker_count == 3
    assert config.kafka.topic_replication_factor == 3
    assert config.kafka.min_insync_replicas == 2


def test_unknown_field() -> None:
    message = _error(_context(_instance(stream={"shards": 2})))
    assert "instances[0] (orders/eu-west-1)" in message
    assert "stream.shards" in message
    assert "unknown field" in message
    assert "retention_hours, shard_count" in message


def test_unknown_top_level_field_in_defaults() -> None:
    message = _error(_context(_instance(), defaults={"colour": "blue"}))
    assert "field colour: unknown field" in message


def test_missing_field() -> None:
    message = _error(_context({"domain": "orders"}))
    assert "instances[0] (orders/None)" in message
    assert "field region: missing required field" in message


def test_duplicate_domain_and_region() -> None:
    message = _error(_context(_instance(), _instance(stream={"shard_count": 2})))
    assert "instances[1]" in message
    assert "duplicate value 'orders'/'eu-west-1'" in message
    assert "instances[0]" in message


@pytest.mark.parametrize("domain", ["Orders", "order_items", "order-items", "o", "1orders"])
def test_domain_that_is_not_a_valid_name_fragment(domain: str) -> None:
    message = _error(_context(_instance(domain=domain)))
    assert "field domain" in message
    assert repr(domain) in message
    assert "lowercase letters/digits" in message


def test_bad_region() -> None:
    message = _error(_context(_instance(region="europe")))
    assert "field region: bad value 'europe'" in message


@pytest.mark.parametrize("shards", [0, -3])
def test_shard_count_below_one(shards: int) -> None:
    message = _error(_context(_instance(stream={"shard_count": shards})))
    assert f"field stream.shard_count: bad value {shards}" in message
    assert "an integer >= 1, or null" in message


def test_shard_count_of_wrong_type() -> None:
    message = _error(_context(_instance(stream={"shard_count": "4"})))
    assert "stream.shard_count: bad value '4'; allowed: an integer" in message


@pytest.mark.parametrize(
    ("section", "field", "value"),
    [
        ("alarms", "iterator_age_ms", 0),
        ("alarms", "end_to_end_latency_ms", -1),
        ("alarms", "scheduling_delay_ratio", 0),
        ("alarms", "failure_records", 0),
        ("alarms", "heartbeat_missing_periods", 0),
        ("job", "trigger_interval_sec", 0),
    ],
)
def test_non_positive_thresholds(section: str, field: str, value: int) -> None:
    message = _error(_context(_instance(**{section: {field: value}})))
    assert f"field {section}.{field}: bad value {value}" in message
    assert "> 0" in message


def test_fetch_time_below_the_connector_minimum() -> None:
    context = _context(_instance(job={"source": {"max_fetch_time_per_shard_sec": 5}}))
    message = _error(context)
    assert "field job.source.max_fetch_time_per_shard_sec: bad value 5" in message
    assert "an integer >= 10" in message


def test_scheduling_delay_ratio_above_one() -> None:
    message = _error(_context(_instance(alarms={"scheduling_delay_ratio": 1.5})))
    assert "alarms.scheduling_delay_ratio: bad value 1.5; allowed: 0 < ratio <= 1" in message


@pytest.mark.parametrize(
    "arn",
    [
        "arn:aws:kafka:eu-west-1:123:cluster/c/uuid-1",
        "arn:aws:kinesis:eu-west-1:123456789012:cluster/c/uuid-1",
        "cluster/c/uuid-1",
        "arn:aws:kafka:eu-west-1:123456789012:topic/c/uuid-1/t",
    ],
)
def test_malformed_msk_cluster_arn(arn: str) -> None:
    message = _error(_context(_instance(kafka={"cluster_arn": arn})))
    assert f"field kafka.cluster_arn: bad value {arn!r}" in message
    assert "arn:aws:kafka:<region>" in message


def test_msk_cluster_in_another_region() -> None:
    arn = "arn:aws:kafka:us-east-1:123456789012:cluster/failures/0b1c2d3e-1111-2222"
    message = _error(_context(_instance(kafka={"cluster_arn": arn})))
    assert "a cluster in the instance's region eu-west-1" in message


@pytest.mark.parametrize(
    "label",
    [
        "emr-8",
        "spark-8.0.0",
        "EMR-7.9.0",
        "emr-7.9",
        "emr-7.9.0",
        "emr-spark-9.9.9",
        # Known, but its Spark (4.0.2) is not the job's 4.1.1.
        "emr-spark-8.0.0",
    ],
)
def test_unsupported_release_label_names_the_allowed_ones(label: str) -> None:
    """Well-formed but unknown labels fail too (the application names are per
    release), and so does a known release whose Spark is not the job's."""
    message = _error(_context(_instance(emr={"release_label": label})))
    assert f"field emr.release_label: bad value {label!r}" in message
    assert "allowed: a release label whose Spark is the job's 4.1.1: emr-spark-8.1.0" in message


def test_the_job_python_defaults_to_the_releases_first_and_must_be_one_it_ships() -> None:
    config = load_instances(_context(_instance()))[0]
    assert config.emr.job_python == "/usr/bin/python3.11"
    chosen = load_instances(_context(_instance(emr={"python": "/usr/bin/python3.13"})))[0]
    assert chosen.emr.job_python == "/usr/bin/python3.13"
    # Listed for emr-spark-8.0.0, not for 8.1.0.
    message = _error(_context(_instance(emr={"python": "/usr/bin/python3.12"})))
    assert "field emr.python: bad value '/usr/bin/python3.12'" in message
    assert "allowed: a Python that emr-spark-8.1.0 ships: /usr/bin/python3.11, " in message


def test_core_instance_type_must_be_sized() -> None:
    message = _error(_context(_instance(emr={"core_instance_type": "t3.micro"})))
    assert "field emr.core_instance_type: bad value 't3.micro'" in message
    assert "m5.xlarge" in message


def test_kafka_version_below_topic_support() -> None:
    message = _error(_context(_instance(kafka={"version": "3.5.1"})))
    assert "field kafka.version: bad value '3.5.1'" in message
    assert ">= 3.6" in message


def test_replication_factor_above_created_broker_count() -> None:
    message = _error(_context(_instance(kafka={"topic_replication_factor": 4})))
    assert "kafka.topic_replication_factor: bad value 4; allowed: <= kafka.broker_count (3)" in (
        message
    )


@pytest.mark.parametrize("min_insync", [3, 4])
def test_min_insync_replicas_must_stay_below_the_replication_factor(min_insync: int) -> None:
    """min.insync.replicas >= RF would block every acks=all write when one replica is down."""
    message = _error(_context(_instance(kafka={"topic_min_insync_replicas": min_insync})))
    assert (
        f"field kafka.topic_min_insync_replicas: bad value {min_insync}; "
        "allowed: < kafka.topic_replication_factor (3)"
    ) in message


def test_min_insync_replicas_is_checked_for_an_existing_cluster_too() -> None:
    arn = "arn:aws:kafka:eu-west-1:123456789012:cluster/failures/0b1c2d3e-1111-2222"
    message = _error(
        _context(
            _instance(
                kafka={
                    "cluster_arn": arn,
                    "topic_replication_factor": 2,
                    "topic_min_insync_replicas": 2,
                }
            )
        )
    )
    assert "field kafka.topic_min_insync_replicas: bad value 2" in message


def test_durability_stays_configurable() -> None:
    kafka = {"broker_count": 6, "topic_replication_factor": 4, "topic_min_insync_replicas": 3}
    (config,) = load_instances(_context(_instance(kafka=kafka)))
    assert (config.kafka.topic_replication_factor, config.kafka.min_insync_replicas) == (4, 3)


def test_existing_vpc_needs_subnets_and_zones() -> None:
    message = _error(_context(_instance(network={"vpc_id": "vpc-0123456789abcdef0"})))
    assert "field network.private_subnet_ids" in message
    assert "at least 2 private subnet ids" in message


def test_existing_vpc_is_accepted_with_subnets() -> None:
    network = {
        "vpc_id": "vpc-0123456789abcdef0",
        "availability_zones": ["eu-west-1a", "eu-west-1b", "eu-west-1c"],
        "private_subnet_ids": [
            "subnet-0123456789abcdef0",
            "subnet-0fedcba9876543210",
            "subnet-0aaaaaaaaaaaaaaaa",
        ],
    }
    (config,) = load_instances(_context(_instance(network=network)))
    assert config.network.private_subnet_ids == tuple(network["private_subnet_ids"])


def test_bad_email() -> None:
    message = _error(_context(_instance(alarms={"emails": ["oncall"]})))
    assert "field alarms.emails[0]: bad value 'oncall'" in message


def test_bad_removal_policy() -> None:
    message = _error(_context(_instance(removal_policy="SNAPSHOT")))
    assert "field removal_policy: bad value 'SNAPSHOT'; allowed: RETAIN | DESTROY" in message


def test_bad_tls_certificate_uri() -> None:
    message = _error(_context(_instance(emr={"tls_certificates_s3_uri": "https://x/certs.zip"})))
    assert "field emr.tls_certificates_s3_uri" in message


def test_missing_tls_certificates() -> None:
    message = _error(_context(_instance(), defaults={}))
    assert "field emr.tls_certificates_s3_uri: missing required field" in message


def test_missing_streaming_section() -> None:
    with pytest.raises(InstanceConfigError, match=r"context\.streaming: missing"):
        load_instances({})


# ---------------------------------------------------------------- one model with the job's


def test_job_section_is_the_job_configs_own_model() -> None:
    """No second declaration of the job's options: same class, same defaults."""
    assert InstanceConfig.model_fields["job"].annotation is JobSettings
    (config,) = load_instances(_context(_instance()))
    assert config.job == JobSettings()
    assert config.job.source.max_fetch_time_per_shard_sec == MIN_FETCH_TIME_SEC


def test_unknown_job_source_field_lists_the_job_settings() -> None:
    message = _error(_context(_instance(job={"source": {"fail_on_data_loss": False}})))
    assert "field job.source.fail_on_data_loss: unknown field; allowed: " in message
    assert ", ".join(sorted(SourceSettings.model_fields)) in message


def test_shipped_defaults_restate_no_model_default() -> None:
    """cdk.json's defaults hold only what the examples choose; the models hold the rest."""
    shipped = read_cdk_context(EXAMPLE_CDK_JSON)["streaming"]["defaults"]
    # The TLS URI has no model default; the placeholder stands in for "none".
    placeholder = "s3://placeholder-bucket/certificates.zip"
    (bare,) = load_instances(
        _context(_instance(emr={"tls_certificates_s3_uri": placeholder}), defaults={})
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
    (config,) = load_instances(_context(_instance(alarms={"scheduling_delay_ratio": 1})))
    assert config.alarms.scheduling_delay_ratio == 1.0
    for bad in (True, "0.5"):
        message = _error(_context(_instance(alarms={"scheduling_delay_ratio": bad})))
        assert f"alarms.scheduling_delay_ratio: bad value {bad!r}; allowed: 0 < ratio <= 1" in (
            message
        )


def test_pattern_must_match_the_whole_value() -> None:
    message = _error(_context(_instance(domain="orders\n")))
    assert "field domain: bad value 'orders\\n'" in message


def test_every_bad_field_of_the_instance_is_reported() -> None:
    message = _error(
        _context(_instance(stream={"retention_hours": 12}, kafka={"topic_partitions": 0}))
    )
    lines = message.splitlines()
    assert lines == [
        "instance instances[0] (orders/eu-west-1): field stream.retention_hours: "
        "bad value 12; allowed: an integer >= 24 and <= 8760",
        "instance instances[0] (orders/eu-west-1): field kafka.topic_partitions: "
        "bad value 0; allowed: an integer > 0",
    ]


def test_broker_count_must_fill_the_client_subnets() -> None:
    network = {"availability_zones": ["eu-west-1a", "eu-west-1b"]}
    message = _error(_context(_instance(network=network, kafka={"broker_count": 3})))
    assert "field kafka.broker_count: bad value 3; allowed: a multiple of the 2 client subnets" in (
        message
    )


def test_kafka_cluster_settings_are_ignored_with_an_existing_cluster() -> None:
    arn = "arn:aws:kafka:eu-west-1:123456789012:cluster/failures/0b1c2d3e-1111-2222"
    (config,) = load_instances(
        _context(_instance(kafka={"cluster_arn": arn, "version": "2.8.1", "broker_count": 3}))
    )
    assert config.kafka.cluster_arn == arn


# ------------------------------------------------ issue 41: what passed when it should not


def test_a_shard_count_above_the_regions_default_quota_is_refused() -> None:
    """Item 3: the bound is the cited default Kinesis shard quota (20,000 in
    eu-west-1, 1,000 where the page says "1,000 or 6,000")."""
    assert default_shard_quota("eu-west-1") == 20_000
    assert default_shard_quota("ap-northeast-2") == 1_000
    message = _error(_context(_instance(stream={"shard_count": 100_000})))
    assert message.startswith(
        "instance instances[0] (orders/eu-west-1): field stream.shard_count: bad value 100000; "
        "allowed: 1..20000: the default Kinesis shard quota of eu-west-1 ("
        "https://docs.aws.amazon.com/streams/latest/dev/service-sizes-and-limits.html)"
    )
    assert "an account with a higher quota sets stream.shard_quota to it" in message
    seoul = _instance(region="ap-northeast-2", stream={"shard_count": 1_001})
    assert "allowed: 1..1000" in _error(_context(seoul))
    (config,) = load_instances(_context(_instance(stream={"shard_count": 20_000})))
    assert config.stream.shard_count == 20_000


def test_the_accounts_shard_quota_raises_the_bound() -> None:
    raised = _instance(stream={"shard_count": 30_000, "shard_quota": 40_000})
    (config,) = load_instances(_context(raised))
    assert config.stream.shard_count == 30_000
    over = _instance(stream={"shard_count": 50_000, "shard_quota": 40_000})
    assert "bad value 50000; allowed: 1..40000: stream.shard_quota" in _error(_context(over))


@pytest.mark.parametrize("region", ["ap-northeast-9", "eu-west-9", "mars-north-1"])
def test_a_region_where_emr_does_not_exist_is_refused(region: str) -> None:
    """Item 3: regions come from the cited list (infra/releases.py)."""
    message = _error(_context(_instance(region=region)))
    assert message == (
        f"instance instances[0] (orders/{region}): field region: bad value {region!r}; "
        "allowed: a Region where Amazon EMR runs, such as eu-west-1 "
        f"({EMR_REGIONS_PAGE}; infra/releases.py EMR_REGIONS)"
    )


def test_eu_west_9_is_blamed_on_the_region_not_on_the_cluster_arn() -> None:
    arn = "arn:aws:kafka:eu-west-1:123456789012:cluster/failures/0b1c2d3e-1111-2222"
    message = _error(_context(_instance(region="eu-west-9", kafka={"cluster_arn": arn})))
    (line,) = message.splitlines()
    assert "field region: bad value 'eu-west-9'" in line
    assert "cluster_arn" not in line


def test_every_listed_region_passes_and_the_release_names_its_regions() -> None:
    assert "ap-northeast-2" in EMR_REGIONS and "eu-west-1" in EMR_REGIONS
    assert release_for("emr-spark-8.1.0").regions == EMR_REGIONS
    for region in EMR_REGIONS:
        assert load_instances(_context(_instance(region=region)))[0].region == region


def test_one_tls_zip_shared_by_two_instances_is_refused() -> None:
    """Item 5: the zip holds a private key; each instance gets its own."""
    shared = {"tls_certificates_s3_uri": "s3://certs-bucket/one.zip"}
    message = _error(
        _context(
            _instance(emr=shared),
            _instance(domain="payments", emr=shared),
            _instance(domain="refunds", region="ap-northeast-2", emr=shared),
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
        _instance(domain=d, emr={"tls_certificates_s3_uri": f"s3://certs-bucket/{d}.zip"})
        for d in ("orders", "payments")
    ]
    assert len(load_instances(_context(*own, defaults={}))) == 2


def test_the_shared_tls_check_looks_only_at_instances_with_an_emr_cluster() -> None:
    """An instance without a cluster (``compute`` other than emr) loads no zip."""
    shared = {"tls_certificates_s3_uri": "s3://certs-bucket/one.zip"}
    a, b = load_instances(
        _context(
            _instance(emr={"tls_certificates_s3_uri": "s3://certs-bucket/a.zip"}),
            _instance(
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


def test_a_created_cluster_defaults_to_a_kafka_version_with_no_end_of_support() -> None:
    """Item 6: 3.6.0 ends 2026-06-01 and MSK phases out new clusters on it;
    3.8.x (MSK's recommended) has no published date."""
    (config,) = load_instances(_context(_instance()))
    assert config.kafka.version == DEFAULT_KAFKA_VERSION == "3.8.x"
    assert DEFAULT_KAFKA_VERSION not in KAFKA_END_OF_SUPPORT
    message = _error(_context(_instance(kafka={"version": "3.6.0"})))
    assert "field kafka.version: bad value '3.6.0'; allowed: a version with no published end" in (
        message
    )
    assert "3.6.0's ends 2026-06-01" in message
    for version in ("3.7.x", "3.9.x", "4.0.x"):
        assert load_instances(_context(_instance(kafka={"version": version})))[0].kafka.version
