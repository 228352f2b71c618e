"""The integration-test app: the fixed instances of ``integ/config.json``,
built by the project's own :func:`build_app`, and one ``IntegTest`` per
instance whose assertion stack produces records and then waits for what a
working instance shows (rows in the table, a failure counted, the job running).

Built two ways from the same code: offline for the snapshot check (the
assertion stacks are not snapshotted: they carry the synth time and nothing
of the instance's state), and by the CDK CLI for ``make integ``, which runs
``python -m integ.app`` in a work directory whose ``cdk.json`` holds this
configuration (the CLI's context then has precedence over nothing)."""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Final

import aws_cdk as cdk
from aws_cdk import integ_tests_alpha as integ

from infra.config import CONTEXT_KEY, InstanceConfigError
from infra.stacks.application import build_app
from infra.stacks.streaming_stack import StreamingStack
from model import contract
from producer.events import MixSpec, generate

CONFIG_PATH: Final = Path(__file__).with_name("config.json")
# How long the assertions wait for the job (a first serverless start pulls the
# image and the dependency archive: minutes), and how often they look.
WAIT_TOTAL: Final = cdk.Duration.minutes(30)
WAIT_INTERVAL: Final = cdk.Duration.minutes(1)
# Few records: the point is that each path works, not throughput.
# A failure kind whose bytes are text: the assertion call's parameters are JSON.
MIX: Final = MixSpec(
    count=50,
    malformed_share=0.04,
    duplicate_share=0.1,
    seed=52,
    failure_kinds=("malformed_json", "missing_field"),
)


def load_config(path: Path = CONFIG_PATH) -> dict[str, Any]:
    """The CDK context of the integration instances (what a ``cdk.json``'s
    ``context`` would hold)."""
    loaded: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return loaded


def instance_ids(context: Mapping[str, Any]) -> dict[str, str]:
    """Test name (the instance's compute: ``serverless``, ``emr``) -> instance id."""
    return {
        instance.get("compute", "emr"): contract.instance_id(instance["domain"], instance["region"])
        for instance in context[CONTEXT_KEY]["instances"]
    }


@dataclass(frozen=True)
class Built:
    app: cdk.App
    stacks: list[StreamingStack]
    tests: list[integ.IntegTest]


def build(
    context: Mapping[str, Any] | None, outdir: str | None = None, now: datetime | None = None
) -> Built:
    """The instances and, for each, its ``IntegTest`` with assertions.
    ``context`` None reads the CLI's (``make integ``); ``now`` fixes the time
    window the failure metric is read over."""
    app, stacks = build_app(context, outdir=outdir)
    moment = now or datetime.now(UTC)
    tests = [add_test(app, stack, moment) for stack in stacks]
    return Built(app, stacks, tests)


def add_test(app: cdk.App, stack: StreamingStack, now: datetime) -> integ.IntegTest:
    """One ``IntegTest`` of ``stack``: produce, then wait for each proof in turn."""
    config = stack.config
    test = integ.IntegTest(
        app,
        f"Integ-{config.instance_id}",
        test_cases=[stack],
        # In the instance's environment, so that it may reference the
        # instance's resources (a cross-environment reference cannot resolve).
        assertion_stack=cdk.Stack(
            app,
            f"IntegAssert-{config.instance_id}",
            env=cdk.Environment(account=config.account, region=config.region),
        ),
        regions=[config.region],
        # Asset hashes change with the job's code; the templates are what is compared.
        diff_assets=False,
    )
    records = generate(MIX, now)
    failures = sum(record.is_failure for record in records)
    produce = test.assertions.aws_api_call(
        "Kinesis",
        "putRecords",
        {
            "StreamName": config.stream_name,
            "Records": [
                {"Data": record.data.decode("utf-8"), "PartitionKey": record.partition_key}
                for record in records
            ],
        },
    )
    chain = produce
    for proof in proofs(test, stack, now, failures):
        chain = chain.next(proof)
    return test


def proofs(
    test: integ.IntegTest, stack: StreamingStack, now: datetime, failures: int
) -> list[integ.IApiCall]:
    """The calls that must come true, each awaited: the job running, the table
    committed (its metadata moved on, data files written), the failures
    counted. A Kafka topic has no AWS read API: the job's ``FailureRecords``
    metric, published after the topic write, stands for it."""
    config = stack.config
    found = [running_job(test, stack)]
    table = test.assertions.aws_api_call(
        "Glue",
        "getTable",
        {"DatabaseName": config.database_name, "Name": contract.EVENTS_TABLE},
    )
    table.expect(
        integ.ExpectedResult.object_like(
            {
                "Table": {
                    "Parameters": {
                        "table_type": "ICEBERG",
                        # Set by the first commit after the table's creation.
                        "previous_metadata_location": integ.Match.string_like_regexp("^s3://"),
                    }
                }
            }
        )
    )
    found.append(table)
    files = test.assertions.aws_api_call(
        "S3", "listObjectsV2", {"Bucket": stack.buckets.data.bucket_name}
    )
    files.expect(
        integ.ExpectedResult.object_like(
            {
                "Contents": integ.Match.array_with(
                    [
                        integ.Match.object_like(
                            {"Key": integ.Match.string_like_regexp(r"\.parquet$")}
                        )
                    ]
                )
            }
        )
    )
    found.append(files)
    counted = test.assertions.aws_api_call(
        "CloudWatch",
        "getMetricStatistics",
        {
            "Namespace": contract.metric_namespace(config.instance_id),
            "MetricName": contract.FAILURE_RECORDS,
            "Dimensions": contract.dimensions(config.instance_id),
            "StartTime": (now - timedelta(hours=1)).isoformat(),
            "EndTime": (now + timedelta(hours=12)).isoformat(),
            # One datapoint over the whole window (a multiple of 60 s).
            "Period": 13 * 3600,
            "Statistics": ["Sum"],
        },
    )
    counted.expect(
        integ.ExpectedResult.object_like(
            {"Datapoints": integ.Match.array_with([integ.Match.object_like({"Sum": failures})])}
        )
    )
    found.append(counted)
    for call in found:
        call.wait_for_assertions(total_timeout=WAIT_TOTAL, interval=WAIT_INTERVAL)
    return found


def running_job(test: integ.IntegTest, stack: StreamingStack) -> integ.IApiCall:
    """The job is RUNNING: a serverless run of the application, or an EMR step."""
    if stack.serverless is not None:
        call = test.assertions.aws_api_call(
            "@aws-sdk/client-emr-serverless",
            "listJobRuns",
            {"applicationId": stack.serverless.application_id, "states": ["RUNNING"]},
        )
        call.expect(
            integ.ExpectedResult.object_like(
                {"jobRuns": integ.Match.array_with([integ.Match.object_like({"state": "RUNNING"})])}
            )
        )
        return call
    if stack.emr is None:
        raise ValueError(f"{stack.stack_name}: neither serverless nor EMR")
    call = test.assertions.aws_api_call(
        "EMR", "listSteps", {"ClusterId": stack.emr.cluster.ref, "StepStates": ["RUNNING"]}
    )
    call.expect(
        integ.ExpectedResult.object_like(
            {
                "Steps": integ.Match.array_with(
                    [integ.Match.object_like({"Status": {"State": "RUNNING"}})]
                )
            }
        )
    )
    return call


def main() -> int:
    """``python -m integ.app``: the app the CDK CLI runs for ``make integ``."""
    try:
        built = build(None)
    except InstanceConfigError as exc:
        print(f"integ: {exc}".replace("\n", "\ninteg: "), file=sys.stderr)
        return 1
    built.app.synth()
    return 0


if __name__ == "__main__":
    sys.exit(main())
