"""``model.kafka_settings`` imports without the job's MSK IAM signer: the
signer is the job's dependency (job/requirements.lock), imported only when a
token is signed, so the model stays importable where only the CDK packages and
boto3 are installed."""

from __future__ import annotations

from model.kafka_settings import KafkaSettings, producer_config
from tests.child_process import probe

_PROBE = r"""
from model import kafka_settings
print("imported")
try:
    kafka_settings.msk_iam_token("eu-west-1")
except ImportError as exc:
    print("token:", exc)
"""


def test_the_settings_import_without_the_signer_and_only_signing_needs_it() -> None:
    out = probe(_PROBE, blocked=("aws_msk_iam_sasl_signer",))
    assert out.splitlines() == ["imported", "token: blocked: aws_msk_iam_sasl_signer"]


def test_the_producer_takes_its_limits_from_the_one_setting() -> None:
    settings = KafkaSettings("b:1", "t", "PLAINTEXT", "r", "i", 5_000, 3_000, 5, 200_000)
    conf = producer_config(settings)
    assert conf["message.max.bytes"] == conf["batch.size"] == 200_000
