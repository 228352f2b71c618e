"""infra/config_fields.py: a field whose value fails its pattern or check stops
synth naming the field, the value and what is allowed."""

from __future__ import annotations

import pytest

from tests.infra.config_cases import config_error, context_of, entry_error, instance_entry


@pytest.mark.parametrize("domain", ["Orders", "order_items", "order-items", "o", "1orders"])
def test_domain_that_is_not_a_valid_name_fragment(domain: str) -> None:
    message = entry_error(domain=domain)
    assert "field domain" in message
    assert repr(domain) in message
    assert "lowercase letters/digits" in message


def test_bad_region() -> None:
    message = entry_error(region="europe")
    assert "field region: bad value 'europe'" in message


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
    message = entry_error(kafka={"cluster_arn": arn})
    assert f"field kafka.cluster_arn: bad value {arn!r}" in message
    assert "arn:aws:kafka:<region>" in message


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
    message = entry_error(emr={"release_label": label})
    assert f"field emr.release_label: bad value {label!r}" in message
    assert "allowed: a release label whose Spark is the job's 4.1.1: emr-spark-8.1.0" in message


def test_core_instance_type_must_be_sized() -> None:
    message = entry_error(emr={"core_instance_type": "t3.micro"})
    assert "field emr.core_instance_type: bad value 't3.micro'" in message
    assert "m5.xlarge" in message


def test_bad_email() -> None:
    message = entry_error(alarms={"emails": ["oncall"]})
    assert "field alarms.emails[0]: bad value 'oncall'" in message


def test_bad_tls_certificate_uri() -> None:
    message = config_error(
        context_of(instance_entry(emr={"tls_certificates_s3_uri": "https://x/certs.zip"}))
    )
    assert "field emr.tls_certificates_s3_uri" in message


def test_pattern_must_match_the_whole_value() -> None:
    message = entry_error(domain="orders\n")
    assert "field domain: bad value 'orders\\n'" in message
