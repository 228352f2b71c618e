"""Fakes for the preflight checks where moto 5.2.5 has no answer.

moto's service-quotas knows only the ``vpc`` service code (its
``get_service_quota`` raises NoSuchResourceException for ``ec2`` codes, and
``get_aws_default_service_quota`` is not implemented), and its kafka backend
has no ``describe_topic``: :class:`FakeServiceQuotas` answers quota codes as
Service Quotas does, :func:`client_error` builds the errors the real APIs
raise."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from botocore.exceptions import ClientError

from infra.config import InstanceConfig, load_instances, read_cdk_context
from tests.fixtures import EXAMPLE_CDK_JSON

TLS = "s3://tls-bucket/tls/orders-eu-west-1/certificates.zip"


def config_of(context_extra: Mapping[str, Any] | None = None, **instance: Any) -> InstanceConfig:
    """orders/eu-west-1 of the example with ``instance`` merged in."""
    context = copy.deepcopy(dict(read_cdk_context(EXAMPLE_CDK_JSON)))
    context["streaming"]["defaults"] = {"emr": {"tls_certificates_s3_uri": TLS}}
    context["streaming"]["instances"] = [{"domain": "orders", "region": "eu-west-1", **instance}]
    return load_instances(context)[0]


def client_error(code: str, operation: str, message: str = "") -> ClientError:
    return ClientError({"Error": {"Code": code, "Message": message or code}}, operation)


class FakeServiceQuotas:
    """Service Quotas for ``applied`` (an increase was granted) and
    ``defaults`` (AWS's default), by (service code, quota code); an unknown
    code raises NoSuchResourceException, as the API does. ``calls`` records
    what was asked."""

    def __init__(
        self,
        applied: Mapping[tuple[str, str], float] | None = None,
        defaults: Mapping[tuple[str, str], float] | None = None,
    ) -> None:
        self.applied = dict(applied or {})
        self.defaults = dict(defaults or {})
        self.calls: list[tuple[str, str, str]] = []

    def _answer(self, table: Mapping[tuple[str, str], float], op: str, **kw: str) -> Any:
        key = (kw["ServiceCode"], kw["QuotaCode"])
        self.calls.append((op, *key))
        if key not in table:
            raise client_error("NoSuchResourceException", op)
        return {"Quota": {"ServiceCode": key[0], "QuotaCode": key[1], "Value": table[key]}}

    def get_service_quota(self, **kw: str) -> Any:
        return self._answer(self.applied, "GetServiceQuota", **kw)

    def get_aws_default_service_quota(self, **kw: str) -> Any:
        return self._answer(self.defaults, "GetAWSDefaultServiceQuota", **kw)


class Answers:
    """A client answering the named methods with canned responses (or raising
    them); any other method is an AttributeError, so an unexpected call fails."""

    def __init__(self, **responses: Any) -> None:
        self.responses = responses
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def __getattr__(self, name: str) -> Any:
        if name not in self.responses:
            raise AttributeError(name)
        response = self.responses[name]

        def call(**kwargs: Any) -> Any:
            self.calls.append((name, kwargs))
            if isinstance(response, Exception):
                raise response
            return copy.deepcopy(response)

        return call
