"""Start the deployed job version on a running cluster: ``make redeploy INSTANCE=<domain-region>``.

Submits exactly the step ``cdk deploy`` submits: the stack output
``JobStepSpec`` (the construct's :class:`infra.emr_step.StepSpec`) goes through
the same :func:`infra.emr_step.build_step`. The step's first command,
``streaming-spark-submit``, does the graceful handover on the cluster: it writes
the stop marker, waits (bounded) until YARN no longer runs the old version,
removes the marker and only then runs ``spark-submit``. That wait happens on the
cluster because "the old job has stopped" is a YARN fact no AWS API exposes.
This command then waits, bounded, for the step to finish and reports how it ended.

Where the cluster and the spec come from, in order: ``--cluster-id`` /
``--spec-file`` if given, else the outputs ``JobClusterId`` / ``JobStepSpec``
of the instance's CloudFormation stack (``Streaming-<domain>-<region>``, or
``--stack``). ``--endpoint-url`` points every client at an emulator.

Exit codes: 0 step completed (or submitted, with ``--wait-sec 0``), 1 step
failed or was cancelled, 2 bad arguments or missing outputs, 3 cluster not
running, 4 still not finished when the wait ran out.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from infra.emr_step import CLUSTER_ID_OUTPUT, STEP_SPEC_OUTPUT, StepSpec, build_step
from model import aws_clients, contract
from model.polling import poll_until
from producer.arguments import non_negative_float, positive_float
from scripts.command import EXIT_USAGE, OperatorError, run_command

INSTANCE_PATTERN = re.compile(
    r"^(?P<domain>[a-z][a-z0-9]{1,30})-(?P<region>[a-z]{2}(-[a-z]+)+-\d)$"
)
RUNNING_CLUSTER_STATES = frozenset({"WAITING", "RUNNING"})
DONE_OK = frozenset({"COMPLETED"})
DONE_BAD = frozenset({"FAILED", "CANCELLED", "INTERRUPTED"})
EXIT_OK, EXIT_STEP_FAILED, EXIT_CLUSTER, EXIT_TIMEOUT = 0, 1, 3, 4
# Every AWS call: bounded connect/read time and a bounded retry budget.
CLIENT_LIMITS = aws_clients.ClientLimits(connect_timeout_sec=5, read_timeout_sec=30, retries=3)


@dataclass(frozen=True)
class Target:
    region: str
    stack_name: str


def parse_instance(instance: str) -> Target:
    found = INSTANCE_PATTERN.fullmatch(instance)
    if found is None:
        raise OperatorError(
            EXIT_USAGE,
            f"--instance {instance!r}: expected <domain>-<region>, e.g. orders-eu-west-1",
        )
    return Target(
        region=found["region"], stack_name=contract.stack_name(found["domain"], found["region"])
    )


def stack_outputs(cloudformation: Any, stack_name: str) -> dict[str, str]:
    try:
        stacks = cloudformation.describe_stacks(StackName=stack_name)["Stacks"]
    except cloudformation.exceptions.ClientError as exc:
        raise OperatorError(EXIT_USAGE, f"stack {stack_name}: {exc}") from exc
    if not stacks:
        raise OperatorError(EXIT_USAGE, f"stack {stack_name}: not found")
    return {o["OutputKey"]: o["OutputValue"] for o in stacks[0].get("Outputs", [])}


def resolve_inputs(
    outputs: Callable[[], dict[str, str]], cluster_id: str | None, spec_file: Path | None
) -> tuple[str, StepSpec]:
    """Flags win; the stack outputs are read only for what the flags leave open."""
    found: dict[str, str] = {}
    if cluster_id is None or spec_file is None:
        found = outputs()
    cluster = cluster_id or found.get(CLUSTER_ID_OUTPUT)
    if not cluster:
        raise OperatorError(
            EXIT_USAGE, f"no cluster id: pass --cluster-id or deploy output {CLUSTER_ID_OUTPUT}"
        )
    raw = spec_file.read_text(encoding="utf-8") if spec_file else found.get(STEP_SPEC_OUTPUT)
    if not raw:
        raise OperatorError(
            EXIT_USAGE, f"no step spec: pass --spec-file or deploy output {STEP_SPEC_OUTPUT}"
        )
    try:
        spec = StepSpec.from_dict(json.loads(raw))
    except (ValueError, TypeError) as exc:
        raise OperatorError(EXIT_USAGE, f"step spec: {exc}") from exc
    return cluster, spec


def wait_for_step(
    emr: Any,
    cluster_id: str,
    step_id: str,
    *,
    wait_sec: float,
    poll_sec: float,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> str:
    """Poll the step until it completes (its state), fails (OperatorError) or
    ``wait_sec`` runs out. Not boto3's ``step_complete`` waiter: it keeps
    waiting on an INTERRUPTED step, and it bounds attempts, not time."""
    state = "unknown"

    def done() -> bool:
        nonlocal state
        state = str(
            emr.describe_step(ClusterId=cluster_id, StepId=step_id)["Step"]["Status"]["State"]
        )
        if state in DONE_BAD:
            raise OperatorError(
                EXIT_STEP_FAILED,
                f"step {step_id} ended {state}; see the step's stderr in the EMR logs "
                "(the launcher exits 8 when the old version did not stop in time)",
            )
        return state in DONE_OK

    poll_until(
        done,
        timeout=wait_sec,
        interval=poll_sec,
        on_timeout=lambda: OperatorError(
            EXIT_TIMEOUT,
            f"step {step_id} still {state} after {wait_sec:.0f}s; it keeps going on the "
            "cluster, check it with `aws emr describe-step`",
        ),
        clock=clock,
        sleep=sleep,
    )
    return state


def redeploy(args: argparse.Namespace, log: Callable[[str], None]) -> int:
    target = parse_instance(args.instance)
    region = args.region or target.region
    stack_name = args.stack or target.stack_name
    clients: dict[str, Any] = {
        name: aws_clients.client(name, CLIENT_LIMITS, region=region, endpoint_url=args.endpoint_url)
        for name in ("cloudformation", "emr")
    }
    cluster_id, spec = resolve_inputs(
        lambda: stack_outputs(clients["cloudformation"], stack_name),
        args.cluster_id,
        args.spec_file,
    )
    emr = clients["emr"]
    state = emr.describe_cluster(ClusterId=cluster_id)["Cluster"]["Status"]["State"]
    if state not in RUNNING_CLUSTER_STATES:
        raise OperatorError(
            EXIT_CLUSTER,
            f"cluster {cluster_id} is {state}; allowed: "
            f"{', '.join(sorted(RUNNING_CLUSTER_STATES))}",
        )
    step = build_step(spec)
    step_id = emr.add_job_flow_steps(JobFlowId=cluster_id, Steps=[step])["StepIds"][0]
    log(f"submitted step {step_id} ({step['Name']}) to {cluster_id}")
    if args.wait_sec <= 0:
        return EXIT_OK
    final = wait_for_step(emr, cluster_id, step_id, wait_sec=args.wait_sec, poll_sec=args.poll_sec)
    log(f"step {step_id} {final}: {spec.app_name} handed over and submitted to YARN")
    return EXIT_OK


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m scripts.redeploy", description=__doc__.split("\n")[0]
    )
    p.add_argument("--instance", required=True, help="<domain>-<region>, e.g. orders-eu-west-1")
    p.add_argument("--stack", help="CloudFormation stack name (default Streaming-<instance>)")
    p.add_argument("--region", help="AWS region (default: the instance's region)")
    p.add_argument("--cluster-id", help="EMR cluster id (default: stack output JobClusterId)")
    p.add_argument("--spec-file", type=Path, help="StepSpec JSON (default: output JobStepSpec)")
    p.add_argument("--endpoint-url", help="AWS endpoint override (emulators)")
    p.add_argument(
        "--wait-sec",
        type=non_negative_float,
        default=900.0,
        help="bound on waiting for the step (handover + submit); 0 = do not wait",
    )
    p.add_argument("--poll-sec", type=positive_float, default=10.0, help="step poll interval")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    return run_command("redeploy", lambda: redeploy(args, lambda line: print(line, flush=True)))


if __name__ == "__main__":
    sys.exit(main())
