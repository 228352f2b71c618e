"""infra/config_fields.py: a field whose value fails its pattern or check stops
synth naming the field, the value and what is allowed."""

from __future__ import annotations

from typing import Any

import pytest

from tests.infra.config_cases import assert_bad_value, assert_refused


@pytest.mark.parametrize("domain", ["Orders", "order_items", "order-items", "o", "1orders"])
def test_domain_that_is_not_a_valid_name_fragment(domain: str) -> None:
    assert_refused({"domain": domain}, "field domain", repr(domain), "lowercase letters/digits")


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
    assert_bad_value("kafka", "cluster_arn", arn, "arn:aws:kafka:<region>")


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
    allowed = "a release label whose Spark is the job's 4.1.1: emr-spark-8.1.0"
    assert_bad_value("emr", "release_label", label, allowed)


@pytest.mark.parametrize(
    ("overrides", "parts"),
    [
        pytest.param({"region": "europe"}, ["field region: bad value 'europe'"], id="region"),
        pytest.param(
            {"emr": {"core_instance_type": "t3.micro"}},
            ["field emr.core_instance_type: bad value 't3.micro'", "m5.xlarge"],
            id="core instance type must be sized",
        ),
        pytest.param(
            {"alarms": {"emails": ["oncall"]}},
            ["field alarms.emails[0]: bad value 'oncall'"],
            id="email",
        ),
        pytest.param(
            {"emr": {"tls_certificates_s3_uri": "https://x/certs.zip"}},
            ["field emr.tls_certificates_s3_uri"],
            id="TLS certificate URI",
        ),
        pytest.param(
            {"domain": "orders\n"},
            ["field domain: bad value 'orders\\n'"],
            id="a pattern must match the whole value",
        ),
    ],
)
def test_a_bad_value_names_the_field(overrides: dict[str, Any], parts: list[str]) -> None:
    assert_refused(overrides, *parts)
