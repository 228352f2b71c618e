"""Which job an operator command is about: the instance's job config, and clients for it.

``status``, ``stop`` and ``produce`` act on the config the job itself runs
with, so they look where the job looks (one source of truth):

* a local run (``--work-dir``, e.g. ``.work/run`` after ``make run``):
  ``<work-dir>/<instance>/job.json``, the file ``local.harness`` hands to
  ``python -m job``; its endpoints point at that run's emulators, which take
  the emulators' fake credentials;
* AWS (the default): the instance must be declared in ``cdk.json``; the job's
  config is the ``job-config.json`` next to the deployed artifact, whose S3
  URI comes from the stack output ``JobStepSpec`` (read as
  ``make redeploy`` reads it, with :func:`scripts.redeploy.stack_outputs`);
* ``--config PATH|s3://…``: any job config file, as ``python -m job --config``.

``--endpoint-url`` sends every client to one endpoint (moto server).
Failures are :class:`OperatorError`: one line naming what is wrong, and an
exit code.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from infra.emr_step import STEP_SPEC_OUTPUT, StepSpec
from model import aws_clients, contract
from model.config import ConfigError, JobConfig
from model.storage_uri import is_s3, local_path, parse_s3_uri
from producer.arguments import non_negative_float, positive_float
from producer.local_run import DEFAULT_WORK_DIR, emulator_client, instances_run, job_config_path
from scripts.command import (
    DEFAULT_CDK_JSON,
    EXIT_USAGE,
    OperatorError,
    declared_instance,
    first_line,
    run_command,
)
from scripts.redeploy import stack_outputs

# An operator waits at the terminal: short connects, one retry. (GetRecords
# may return up to 10 MiB, hence the longer read.)
OPERATOR_LIMITS: Final = aws_clients.ClientLimits(
    connect_timeout_sec=3, read_timeout_sec=30, retries=1
)


@dataclass(frozen=True)
class Target:
    """An instance's job as an operator command sees it."""

    config: JobConfig
    origin: str  # where the config was read, for the report's header
    stack_name: str
    local: bool  # a local run: fake credentials, the run's own endpoints
    endpoint_url: str | None = None  # --endpoint-url: every client goes there

    @property
    def instance_id(self) -> str:
        return self.config.instance_id

    def endpoint(self, service: str) -> str | None:
        """The endpoint the job itself uses for ``service`` (None: AWS's own)."""
        if self.endpoint_url:
            return self.endpoint_url
        config = self.config
        return {
            "kinesis": config.kinesis_endpoint_url,
            "s3": config.s3_endpoint_url,
            "cloudwatch": config.metrics.endpoint_url,
            "glue": config.catalog.endpoint_url,
        }.get(service)

    def client(self, service: str, limits: aws_clients.ClientLimits = OPERATOR_LIMITS) -> Any:
        region, endpoint = self.config.region, self.endpoint(service)
        if self.local:
            return emulator_client(service, limits, region, endpoint)
        return aws_clients.client(service, limits, region=region, endpoint_url=endpoint)


def local_config_path(work_dir: Path, instance: str) -> Path:
    """Where the harness wrote the config of ``instance`` in a run's work dir
    (:func:`producer.local_run.job_config_path`), or why it is not there."""
    path = job_config_path(work_dir, instance)
    if not work_dir.is_dir():
        raise OperatorError(
            EXIT_USAGE,
            f"--work-dir {work_dir}: no such directory "
            f"(make run leaves its work dir at {DEFAULT_WORK_DIR})",
        )
    if not path.is_file():
        runs = ", ".join(instances_run(work_dir)) or "none"
        raise OperatorError(
            EXIT_USAGE,
            f"--instance {instance!r}: no local run under {work_dir} (no {path}); "
            f"instances run there: {runs}",
        )
    return path


def parse_config(text: str, origin: str, instance: str) -> JobConfig:
    try:
        config = JobConfig.from_json(text, origin)
    except ConfigError as exc:
        problem = first_line(exc)
        raise OperatorError(EXIT_USAGE, f"{origin}: invalid job config: {problem}") from exc
    if config.instance_id != instance:
        raise OperatorError(
            EXIT_USAGE,
            f"{origin}: is the config of instance {config.instance_id!r}, not {instance!r}",
        )
    return config


def read_text(uri: str, s3: Any) -> str:
    """A local file or an S3 object, as text."""
    if is_s3(uri):
        bucket, key = parse_s3_uri(uri)
        try:
            body = s3.get_object(Bucket=bucket, Key=key)["Body"].read()
        except s3.exceptions.NoSuchKey as exc:
            raise OperatorError(EXIT_USAGE, f"{uri}: no such object") from exc
        return str(body.decode("utf-8"))
    path = Path(local_path(uri))
    if not path.is_file():
        raise OperatorError(EXIT_USAGE, f"{uri}: no such file")
    return path.read_text(encoding="utf-8")


def deployed_config_uri(outputs: Mapping[str, str], stack_name: str) -> str:
    """The S3 URI of the deployed job config, from the stack output ``JobStepSpec``."""
    raw = outputs.get(STEP_SPEC_OUTPUT)
    if not raw:
        raise OperatorError(
            EXIT_USAGE,
            f"stack {stack_name}: no output {STEP_SPEC_OUTPUT}; deploy the instance "
            "(cdk deploy) or pass --config",
        )
    try:
        return StepSpec.from_dict(json.loads(raw)).config_uri
    except (ValueError, TypeError) as exc:
        raise OperatorError(
            EXIT_USAGE, f"stack {stack_name}: output {STEP_SPEC_OUTPUT}: {exc}"
        ) from exc


def resolve(
    instance: str,
    *,
    work_dir: Path | None = None,
    config_file: str | None = None,
    cdk_json: Path = DEFAULT_CDK_JSON,
    endpoint_url: str | None = None,
) -> Target:
    """The instance's job config, from a local run, a given file or the deployed stack."""
    if work_dir is not None:
        path = local_config_path(work_dir, instance)
        config = parse_config(path.read_text(encoding="utf-8"), str(path), instance)
        return Target(
            config, f"{path} (local run)", _stack_of(config), local=True, endpoint_url=endpoint_url
        )
    declared = declared_instance(instance, cdk_json)

    def client(service: str) -> Any:
        return aws_clients.client(
            service, OPERATOR_LIMITS, region=declared.region, endpoint_url=endpoint_url
        )

    uri = config_file
    if uri is None:
        outputs = stack_outputs(client("cloudformation"), declared.stack_name)
        uri = deployed_config_uri(outputs, declared.stack_name)
    text = read_text(uri, client("s3") if is_s3(uri) else None)
    config = parse_config(text, uri, instance)
    return Target(config, uri, declared.stack_name, local=False, endpoint_url=endpoint_url)


def _stack_of(config: JobConfig) -> str:
    """The stack an instance id belongs to (``<domain>-<region>`` → ``Streaming-…``)."""
    domain, _, region = config.instance_id.partition("-")
    return contract.stack_name(domain, region)


def target_arguments(p: argparse.ArgumentParser) -> None:
    """The flags that pick the instance's job; shared by status, stop and produce."""
    p.add_argument("--instance", required=True, help="<domain>-<region>, e.g. orders-eu-west-1")
    p.add_argument(
        "--work-dir",
        type=Path,
        help="a local run's work dir (make run: .work/run); default: the deployed stack",
    )
    p.add_argument("--config", help="a job config file or s3:// URI instead of the stack's")
    p.add_argument("--cdk-json", type=Path, default=DEFAULT_CDK_JSON, help="declared instances")
    p.add_argument("--endpoint-url", help="one endpoint for every AWS client (moto server)")


def wait_arguments(
    p: argparse.ArgumentParser, flag: str, default: float, until: str, zero: str, *, poll: float
) -> None:
    """The bound of a command that waits on the job's lease (start, stop):
    ``flag``, the seconds to wait for ``until`` (0: ``zero``), and ``--poll-sec``."""
    p.add_argument(
        flag,
        type=non_negative_float,
        default=default,
        help=f"seconds to wait for {until}, >= 0 (default {default:g}; 0: {zero})",
    )
    p.add_argument(
        "--poll-sec",
        type=positive_float,
        default=poll,
        help=f"lease poll interval (default {poll:g})",
    )


def target_from_args(args: argparse.Namespace) -> Target:
    """The target the :func:`target_arguments` flags pick."""
    return resolve(
        args.instance,
        work_dir=args.work_dir,
        config_file=args.config,
        cdk_json=args.cdk_json,
        endpoint_url=args.endpoint_url,
    )


def target_command(
    name: str,
    parser: argparse.ArgumentParser,
    act: Callable[[Target, argparse.Namespace, Callable[[str], None]], int],
    argv: Sequence[str] | None,
    out: Any,
) -> int:
    """The ``main`` of a command about one instance's job: parse ``argv``,
    resolve the target from the :func:`target_arguments` flags, and run
    ``act(target, args, say)``, ``say`` printing a line to ``out`` (default
    stdout) at once; failures as :func:`run_command` turns them into lines."""
    args = parser.parse_args(argv)
    stream = out or sys.stdout

    def say(line: str) -> None:
        print(line, file=stream, flush=True)

    return run_command(name, lambda: act(target_from_args(args), args, say))
