"""Fixtures of the end-to-end suite: fresh emulators per case, the example
instances (tests/fixtures/cdk.json: the cases name them; the repository's
``cdk.json`` is the user's), and a job config tuned for short cases.

Every case runs the real job (``python -m job``) as a child process against a
real HTTP AWS emulator (moto), a real Kafka-protocol broker (tansu) and an
embedded Hive metastore, through :mod:`local.harness`, the code behind
``make run``.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Final

import pytest

from local.emulators import Emulators, running_emulators
from local.harness import LocalInstance, load_example_instances
from producer.events import FAILURE_KINDS, MixSpec, SampleRecord, generate, now_utc
from tests.fixtures import EXAMPLE_CDK_JSON
from tests.waits import poll

# The cases import the tests' one wait from here with the fixtures' helpers.
__all__ = ["E2E_OVERRIDES", "MAX_RECORD_BYTES", "MakeLocal", "assert_all_once", "mix", "poll"]

MAX_RECORD_BYTES: Final = 16_384
# Short trigger, short lease (a killed job's lease must expire before the
# restart can take over), Kafka timeouts short enough that "broker down"
# fails a batch in seconds, and a shard-list refresh fast enough to see a split.
E2E_OVERRIDES: Final[dict[str, Any]] = {
    "trigger_interval_sec": 1,
    "max_record_bytes": MAX_RECORD_BYTES,
    "lease_ttl_sec": 6,
    "lease_wait_sec": 20,
    "stop_poll_interval_sec": 1,
    "kafka": {"delivery_timeout_ms": 8_000, "request_timeout_ms": 4_000, "flush_timeout_sec": 15},
    "source": {"describe_shard_interval_sec": 2, "max_fetch_records_per_shard": 2_000},
}


def mix(count: int, *, seed: int, prefix: str, **kw: Any) -> list[SampleRecord]:
    """The default e2e mix: every failure kind, including an oversize record."""
    spec = MixSpec(
        count=count,
        seed=seed,
        id_prefix=prefix,
        failure_kinds=FAILURE_KINDS,
        too_large_bytes=MAX_RECORD_BYTES + 512,
        **kw,
    )
    return generate(spec, now_utc())


def assert_all_once(local: LocalInstance, produced: int) -> None:
    """The run's verdict: all ``produced`` events put, each valid one in the
    table once and each failure in the failure topic."""
    summary = local.summary()
    assert len(local.produced) == produced
    assert summary.duplicate_ids == 0
    assert summary.missing_ids == ()
    assert summary.missing_failures == ()
    assert summary.ok, summary.problems


@pytest.fixture(scope="session")
def instances() -> dict[str, Any]:
    return {i.instance_id: i for i in load_example_instances(EXAMPLE_CDK_JSON)}


@pytest.fixture
def emulators(tmp_path: Path) -> Iterator[Emulators]:
    with running_emulators(tmp_path / "logs") as running:
        yield running


@pytest.fixture
def kafka_on_s3_emulators(tmp_path: Path) -> Iterator[Emulators]:
    with running_emulators(tmp_path / "logs", kafka_on_s3=True) as running:
        yield running


MakeLocal = Callable[..., LocalInstance]


@pytest.fixture
def make_local(tmp_path: Path, instances: dict[str, Any]) -> Iterator[Callable[..., LocalInstance]]:
    """Build an instance on given emulators; every job it started is stopped
    (SIGTERM, then SIGKILL) when the case ends, pass or fail."""
    made: list[LocalInstance] = []

    def build(
        emulators: Emulators,
        instance_id: str = "orders-ap-northeast-2",
        *,
        shards: int = 2,
        overrides: dict[str, Any] | None = None,
    ) -> LocalInstance:
        merged = {**E2E_OVERRIDES}
        for key, value in (overrides or {}).items():
            if isinstance(value, dict) and isinstance(merged.get(key), dict):
                merged[key] = {**merged[key], **value}
            else:
                merged[key] = value
        local = LocalInstance.create(
            instances[instance_id],
            tmp_path / instance_id,
            emulators.endpoints,
            overrides=merged,
            shard_count=shards,
        )
        made.append(local)
        return local

    yield build
    for local in made:
        for job in local.all_jobs:
            job.close()


@pytest.fixture
def rng() -> random.Random:
    return random.Random(20261121)
