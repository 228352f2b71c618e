"""Start a stopped job again: ``make start-job INSTANCE=<domain-region> [ARGS=...]``.

The one start after ``make stop-job``, ``SupervisorGaveUp``, ``make
migrate-checkpoint`` or any stop the supervisor rightly leaves alone, on
either target, with what the stack itself starts the job with:

* EMR (stack output ``JobClusterId``): the step ``cdk deploy`` submits, the
  stack output ``JobStepSpec`` through :func:`infra.emr_step.build_step`, as
  ``make redeploy`` does (:func:`scripts.redeploy.resolve_inputs`);
* EMR Serverless (stack output ``ServerlessApplicationId``): the stack's own
  ``StartJobRun`` request, read where the supervisor reads it (its Lambda's
  ``START_JOB_RUN``, :class:`infra.supervisor.serverless.ServerlessRun`, the
  same request the job-run resource sends) and started as the supervisor's
  restart does;
* a local run (``--work-dir``): the harness's own launch, on the run's
  ``job.json`` (:mod:`local.start_job`, run as a child process: the operator
  commands never import the harness).

Before starting it refuses while a job runs: the instance's lease is held
(:mod:`scripts.status.lease`, the same answer locally and on AWS), or,
serverless, a run of the application is active (the service is starting or
retrying it), or, EMR, a step of the cluster is pending or running. It
clears ONLY an operator's stop marker (``make stop-job``'s, or any marker not
written by a handover: :meth:`model.graceful_stop.StopMarker.requester`); a
deploy's handover marker means a deploy is starting the job: it refuses and
leaves it. Then it waits, at most ``--wait-sec``, until the new job holds the
lease; a job that ends first is reported from its exit record.

Exit codes: 0 started (holding the lease; or submitted, with ``--wait-sec
0``); 1 the job exited at start (its exit record says why); 2 bad arguments,
unknown instance, missing outputs; 3 refused: a job runs, a start or a
handover is under way, or the cluster or application cannot run it; 4 not
holding the lease when ``--wait-sec`` ran out (it may still start: ``make
status``); 5 another AWS call failed.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Protocol

from infra.emr_step import CLUSTER_ID_OUTPUT, build_step
from infra.supervisor.serverless import ENV_APPLICATION_ID, ENV_REQUEST, ServerlessRun
from model import contract
from model.exit_record import ExitRecord
from model.graceful_stop import StopMarker
from model.polling import wait_for
from scripts.command import EXIT_USAGE, OperatorError
from scripts.redeploy import RUNNING_CLUSTER_STATES, resolve_inputs, stack_outputs
from scripts.status.lease import job_state
from scripts.status.target import Target, target_arguments, target_command, wait_arguments
from scripts.stop import fresh_exit

EXIT_STARTED: Final = 0
EXIT_EXITED: Final = 1
EXIT_REFUSED: Final = 3
EXIT_TIMEOUT: Final = 4
# The stack output naming the instance's EMR Serverless application
# (infra/serverless/app.py, APPLICATION_OUTPUT; not imported: that
# module builds constructs, and this command runs without the CDK app).
APPLICATION_OUTPUT: Final = "ServerlessApplicationId"
# EMR steps that are a start under way: not yet run, or running (the job's
# step ends once YARN accepted the job). ListSteps' StepStates filter, of the
# StepState values PENDING | CANCEL_PENDING | RUNNING | COMPLETED | CANCELLED |
# FAILED | INTERRUPTED (https://docs.aws.amazon.com/emr/latest/APIReference/API_ListSteps.html).
ACTIVE_STEP_STATES: Final = ("PENDING", "RUNNING")
FUNCTION_TYPE: Final = "AWS::Lambda::Function"
REPO_ROOT: Final = Path(__file__).resolve().parents[1]


class Launcher(Protocol):
    """How the job is started on one target: what blocks a start, and the start."""

    def busy(self) -> str | None:
        """Why a start now would make a second job (None: nothing under way)."""
        ...

    def start(self) -> str:
        """Start the job; one line saying what was started."""
        ...


@dataclass(frozen=True)
class LocalLauncher:
    """A local run: the harness's launch in a child process (:mod:`local.start_job`)."""

    work_dir: Path
    instance: str
    cdk_json: Path | None = None

    def busy(self) -> str | None:
        return None  # the lease is the only sign of a local job

    def start(self) -> str:
        command = [
            sys.executable,
            "-m",
            "local.start_job",
            "--work-dir",
            str(self.work_dir.resolve()),
            "--instance",
            self.instance,
        ]
        if self.cdk_json is not None:
            command += ["--cdk-json", str(self.cdk_json.resolve())]
        done = subprocess.run(
            command, cwd=REPO_ROOT, capture_output=True, text=True, timeout=120, check=False
        )
        if done.returncode != 0:
            lines = done.stderr.strip().splitlines() or ["the local launch failed"]
            raise OperatorError(EXIT_USAGE, lines[-1].removeprefix("start-job: "))
        log = self.work_dir / self.instance / "job.log"
        return f"job started (pid {done.stdout.strip()}), log {log}"


@dataclass(frozen=True)
class EmrLauncher:
    """The stack's step on its cluster (what ``cdk deploy`` and ``make redeploy`` submit)."""

    emr: Any
    outputs: Mapping[str, str]

    def busy(self) -> str | None:
        cluster, _ = resolve_inputs(lambda: dict(self.outputs), None, None)
        state = self.emr.describe_cluster(ClusterId=cluster)["Cluster"]["Status"]["State"]
        if state not in RUNNING_CLUSTER_STATES:
            allowed = ", ".join(sorted(RUNNING_CLUSTER_STATES))
            return f"cluster {cluster} is {state}; allowed: {allowed}"
        steps = self.emr.list_steps(ClusterId=cluster, StepStates=list(ACTIVE_STEP_STATES))
        active = [s["Id"] for s in steps.get("Steps", [])]
        if active:
            return f"cluster {cluster} has steps under way: {', '.join(active)}"
        return None

    def start(self) -> str:
        cluster, spec = resolve_inputs(lambda: dict(self.outputs), None, None)
        step = build_step(spec)
        step_id = self.emr.add_job_flow_steps(JobFlowId=cluster, Steps=[step])["StepIds"][0]
        return f"submitted step {step_id} ({step['Name']}) to {cluster}"


@dataclass(frozen=True)
class ServerlessLauncher:
    """The stack's own StartJobRun request on its application, as the supervisor restarts it."""

    client: Any
    run: ServerlessRun

    def busy(self) -> str | None:
        state, detail, active = self.run.state(self.client)
        if state != "ready":
            return f"application {self.run.application_id} is {detail}: it cannot run the job"
        if active:
            return (
                f"application {self.run.application_id} has an active job run (the service "
                "is starting or retrying it)"
            )
        return None

    def start(self) -> str:
        return f"started {self.run.restart(self.client)} on {self.run.application_id}"


def supervisor_request(cloudformation: Any, lambda_: Any, stack_name: str) -> ServerlessRun:
    """The stack's StartJobRun request, from the environment of its supervisor
    (the one function of the stack with ``APPLICATION_ID`` and ``START_JOB_RUN``)."""
    pages = cloudformation.get_paginator("list_stack_resources").paginate(StackName=stack_name)
    for page in pages:
        for resource in page["StackResourceSummaries"]:
            if resource["ResourceType"] != FUNCTION_TYPE:
                continue
            found = lambda_.get_function_configuration(FunctionName=resource["PhysicalResourceId"])
            env = found.get("Environment", {}).get("Variables", {})
            if ENV_APPLICATION_ID in env and ENV_REQUEST in env:
                try:
                    return ServerlessRun.from_env(env)
                except (ValueError, TypeError) as exc:
                    raise OperatorError(
                        EXIT_USAGE, f"stack {stack_name}: supervisor {ENV_REQUEST}: {exc}"
                    ) from exc
    raise OperatorError(
        EXIT_USAGE,
        f"stack {stack_name}: no supervisor function with {ENV_APPLICATION_ID} and "
        f"{ENV_REQUEST}; deploy the instance (cdk deploy)",
    )


def launcher_for(target: Target, args: argparse.Namespace) -> Launcher:
    """The target's launcher: a local run, or the deployed stack's compute."""
    if target.local:
        return LocalLauncher(args.work_dir, target.instance_id, args.cdk_json_for_run)
    outputs = stack_outputs(target.client("cloudformation"), target.stack_name)
    if CLUSTER_ID_OUTPUT in outputs:
        return EmrLauncher(target.client("emr"), outputs)
    if APPLICATION_OUTPUT in outputs:
        run = supervisor_request(
            target.client("cloudformation"), target.client("lambda"), target.stack_name
        )
        return ServerlessLauncher(target.client("emr-serverless"), run)
    raise OperatorError(
        EXIT_USAGE,
        f"stack {target.stack_name}: neither {CLUSTER_ID_OUTPUT} nor {APPLICATION_OUTPUT} "
        "in its outputs; deploy the instance (cdk deploy)",
    )


def start(
    target: Target,
    launcher: Launcher,
    *,
    wait_sec: float,
    poll_sec: float,
    log: Callable[[str], None],
    clock: Callable[[], float] = time.time,
) -> int:
    config = target.config
    s3 = target.client("s3")
    name = target.instance_id
    before = job_state(config, s3, clock())
    if before.running:
        raise OperatorError(
            EXIT_REFUSED,
            f"{name}: job {before.line()}: refused, a start would make a second job; "
            "make stop-job stops it, make redeploy hands over to a new version",
        )
    blocked = launcher.busy()
    if blocked is not None:
        raise OperatorError(EXIT_REFUSED, f"{name}: {blocked}; refused")
    marker = None if config.stop_marker_path is None else StopMarker(config.stop_marker_path, s3)
    if marker is not None and marker.present():
        if marker.requester() == contract.STOP_BY_HANDOVER:
            raise OperatorError(
                EXIT_REFUSED,
                f"{name}: stop marker {marker.path} was written by a deploy's handover, "
                "which starts the job itself; refused, the marker is left as it is",
            )
        marker.consume()
        log(f"{name}: cleared the operator's stop marker {marker.path}")
    since = clock()
    log(f"{name}: {launcher.start()}")
    if wait_sec <= 0:
        return EXIT_STARTED
    started = time.monotonic()
    ended: list[ExitRecord] = []

    def holding() -> bool:
        if job_state(config, s3, clock()).running:
            return True
        record = fresh_exit(config, s3, since)
        if record is not None:
            ended.append(record)
            return True
        return False

    if not wait_for(holding, timeout=wait_sec, interval=poll_sec):
        log(
            f"{name}: the job does not hold its lease after {wait_sec:.0f}s; it may still be "
            "starting: make status shows it"
        )
        return EXIT_TIMEOUT
    seconds = time.monotonic() - started
    if ended:
        log(f"{name}: the job exited at start after {seconds:.1f}s: {ended[0].line()}")
        return EXIT_EXITED
    log(f"{name}: job {job_state(config, s3, clock()).line()} after {seconds:.1f}s")
    return EXIT_STARTED


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m scripts.start", description=__doc__.split("\n")[0])
    target_arguments(p)
    wait_arguments(p, "--wait-sec", 600.0, "the job to hold its lease", "do not wait", poll=2.0)
    return p


def main(argv: Sequence[str] | None = None, out: Any = None) -> int:
    def act(target: Target, args: argparse.Namespace, say: Callable[[str], None]) -> int:
        # A local run's job is built from cdk.json as the run read it (its own
        # copy, if it made one); --cdk-json given explicitly wins.
        args.cdk_json_for_run = args.cdk_json if _given(argv, "--cdk-json") else None
        return start(
            target,
            launcher_for(target, args),
            wait_sec=args.wait_sec,
            poll_sec=args.poll_sec,
            log=say,
        )

    return target_command("start-job", parser(), act, argv, out)


def _given(argv: Sequence[str] | None, flag: str) -> bool:
    words = sys.argv[1:] if argv is None else list(argv)
    return any(w == flag or w.startswith(flag + "=") for w in words)


if __name__ == "__main__":
    sys.exit(main())
