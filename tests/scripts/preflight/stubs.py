"""The preflight tests' instances (an example cdk.json with a TLS URI) and the
stub clients for answers moto does not give."""

from __future__ import annotations

import copy
import io
import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from botocore.exceptions import ClientError

from infra.config import InstanceConfig, load_instances, read_cdk_context
from scripts import certs
from scripts.preflight.quotas import ELASTIC_IPS, ON_DEMAND_STANDARD, VPCS_PER_REGION
from tests.fixtures import EXAMPLE_CDK_JSON
from tests.scripts.preflight.fakes import FakeServiceQuotas

TLS = "s3://tls-bucket/tls/orders-eu-west-1/certificates.zip"
MSK_ARN = "arn:aws:kafka:eu-west-1:123456789012:cluster/failures/0b1c2d3e-1111-2222"


def _cdk_json(tmp_path: Path, **instance: Any) -> Path:
    raw = json.loads(EXAMPLE_CDK_JSON.read_text(encoding="utf-8"))
    raw["context"]["streaming"]["defaults"] = {"emr": {"tls_certificates_s3_uri": TLS}}
    raw["context"]["streaming"]["instances"] = [
        {"domain": "orders", "region": "eu-west-1", "stream": {"shard_count": 2}, **instance}
    ]
    path = tmp_path / "cdk.json"
    path.write_text(json.dumps(raw), encoding="utf-8")
    return path


def _config(**instance: Any) -> InstanceConfig:
    context = copy.deepcopy(dict(read_cdk_context(EXAMPLE_CDK_JSON)))
    context["streaming"]["defaults"] = {"emr": {"tls_certificates_s3_uri": TLS}}
    context["streaming"]["instances"] = [{"domain": "orders", "region": "eu-west-1", **instance}]
    return load_instances(context)[0]


# ------------------------------------------------------------------ stubs


class Stub:
    """Answers one method with a canned response (or raises it); keeps the
    keyword arguments of each call in ``calls``."""

    def __init__(self, **responses: Any) -> None:
        self.responses = responses
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def __getattr__(self, name: str) -> Any:
        response = self.responses[name]

        def call(**kwargs: Any) -> Any:
            self.calls.append((name, kwargs))
            if isinstance(response, Exception):
                raise response
            return response() if callable(response) else response

        return call


def _access_denied(operation: str) -> ClientError:
    error = {"Code": "AccessDeniedException", "Message": "User is not authorized"}
    return ClientError({"Error": error}, operation)


class Ec2Stub(Stub):
    """A Stub whose paginators yield the canned response as one page."""

    def get_paginator(self, operation: str) -> Any:
        page = self.responses[operation]
        return SimpleNamespace(paginate=lambda **kwargs: [page])


class EntityNotFoundError(ClientError):
    pass


class GlueStub:
    """The account's Data Catalog holds the ``default`` database only."""

    exceptions = SimpleNamespace(EntityNotFoundException=EntityNotFoundError)

    def get_database(self, Name: str) -> Any:  # noqa: N803 (boto3's keyword)
        if Name == "default":
            return {"Database": {"Name": "default"}}
        raise EntityNotFoundError({"Error": {"Code": "EntityNotFoundException"}}, "GetDatabase")


IAM_ONLY = [
    {"Principal": {"DataLakePrincipalIdentifier": "IAM_ALLOWED_PRINCIPALS"}, "Permissions": ["ALL"]}
]


def _healthy_clients(config: InstanceConfig) -> dict[str, Any]:
    """Stubs every check passes with (for ``config``'s region)."""
    zipped = certs.certificate_zip(config.region, days=365)
    return {
        "emr": Stub(list_release_labels={"ReleaseLabels": [config.emr.release_label]}),
        "s3": Stub(get_object=lambda: {"Body": io.BytesIO(zipped)}),
        "sts": Stub(get_caller_identity={"Account": "123456789012"}),
        "ec2": Ec2Stub(
            describe_availability_zones={
                "AvailabilityZones": [{"ZoneName": f"{config.region}{z}"} for z in "abc"]
            },
            describe_instances={"Reservations": []},
            describe_vpcs={"Vpcs": [{"VpcId": "vpc-default"}]},
            describe_addresses={"Addresses": []},
        ),
        "kafka": Stub(list_clusters_v2={"ClusterInfoList": []}),
        "glue": GlueStub(),
        "lakeformation": Stub(
            get_data_lake_settings={
                "DataLakeSettings": {
                    "CreateDatabaseDefaultPermissions": IAM_ONLY,
                    "CreateTableDefaultPermissions": IAM_ONLY,
                }
            }
        ),
        "kinesis": Stub(describe_limits={"OpenShardCount": 0, "ShardLimit": 20000,
                                         "OnDemandStreamCount": 0, "OnDemandStreamCountLimit": 50},
                        describe_stream_summary=_not_found("DescribeStreamSummary")),
        "cloudformation": Stub(describe_stacks=ClientError(
            {"Error": {"Code": "ValidationError", "Message": "Stack with id x does not exist"}},
            "DescribeStacks")),
        "logs": Stub(describe_log_groups={"logGroups": []}),
        "service-quotas": FakeServiceQuotas(
            applied={ON_DEMAND_STANDARD: 64, VPCS_PER_REGION: 5, ELASTIC_IPS: 5}
        ),
    }  # fmt: skip


def _not_found(operation: str) -> ClientError:
    return ClientError({"Error": {"Code": "ResourceNotFoundException"}}, operation)


def _msk(**provisioned: Any) -> dict[str, Any]:
    base = {
        "CurrentBrokerSoftwareInfo": {"KafkaVersion": "3.6.0"},
        "ClientAuthentication": {"Sasl": {"Iam": {"Enabled": True}}},
        "NumberOfBrokerNodes": 3,
    }
    return {
        "ClusterInfo": {
            "ClusterType": "PROVISIONED",
            "State": "ACTIVE",
            "Provisioned": {**base, **provisioned},
        }
    }
