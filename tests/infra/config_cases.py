"""Instance declarations for the configuration tests (test_config.py,
test_config_sections.py, test_config_fields.py): the example's defaults with
one instance, and the error a bad one stops synth with."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from infra.config import InstanceConfigError, load_instances, read_cdk_context
from tests.infra.conftest import EXAMPLE_CDK_JSON


def context_of(
    *instances: dict[str, Any], defaults: dict[str, Any] | None = None
) -> dict[str, Any]:
    """A ``cdk.json`` context: the example's defaults (or ``defaults``) and ``instances``."""
    base = read_cdk_context(EXAMPLE_CDK_JSON)["streaming"]["defaults"]
    return {
        "streaming": {
            "defaults": copy.deepcopy(base if defaults is None else defaults),
            "instances": list(instances),
        }
    }


def instance_entry(**overrides: Any) -> dict[str, Any]:
    """orders in eu-west-1, with ``overrides``."""
    entry: dict[str, Any] = {"domain": "orders", "region": "eu-west-1"}
    entry.update(overrides)
    return entry


def config_error(context: dict[str, Any]) -> str:
    """The message ``load_instances`` refuses ``context`` with."""
    with pytest.raises(InstanceConfigError) as caught:
        load_instances(context)
    return str(caught.value)


def entry_error(**overrides: Any) -> str:
    """The message one instance (``instance_entry(**overrides)``) over the example's
    defaults is refused with."""
    return config_error(context_of(instance_entry(**overrides)))


def assert_refused(overrides: dict[str, Any], *parts: str) -> None:
    """One instance (``instance_entry(**overrides)``) is refused, and the
    message holds every one of ``parts``: the field, the value, what is allowed."""
    assert parts, "a refusal is checked against at least the field it names"
    message = entry_error(**overrides)
    missing = [part for part in parts if part not in message]
    assert not missing, f"{missing} not in the refusal: {message}"


def assert_bad_value(section: str, field: str, value: Any, allowed: str) -> None:
    """An instance whose ``section.field`` is ``value`` is refused with
    ``field <section>.<field>: bad value <repr>; allowed: <allowed>...``
    (``allowed``: the start of what is allowed)."""
    expected = f"field {section}.{field}: bad value {value!r}; allowed: {allowed}"
    assert_refused({section: {field: value}}, expected)


def existing_network(region: str) -> dict[str, Any]:
    """An existing VPC's ``network`` section: its id, three zones of ``region``
    and a private subnet in each."""
    return {
        "vpc_id": "vpc-0123456789abcdef0",
        "availability_zones": [f"{region}{zone}" for zone in "abc"],
        "private_subnet_ids": [
            "subnet-0123456789abcdef0",
            "subnet-0fedcba9876543210",
            "subnet-0aaaabbbbccccdddd",
        ],
    }
