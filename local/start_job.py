"""Start a local run's job again, detached: the launch behind ``make start-job --work-dir``.

On AWS the operator's start submits the stack's own step or StartJobRun
request (:mod:`scripts.start`); a local run's equivalent is the harness's own
launch (:func:`local.serverless_launch.start_job_process`: ``python -m job`` as
the EMR step runs it, or spark-submit of a serverless instance's job run), on
the config the run wrote (``<work dir>/<instance>/job.json``). The operator
commands never import the harness, so :mod:`scripts.start` runs this module as
a child process; the job it starts is in a session of its own and outlives
both, as a job on a cluster outlives the command that submitted it. Its log is
appended to the run's ``job.log``.

Prints the job's pid. Exit codes: 0 started, 2 no such run or instance.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

from local.harness import CDK_JSON, load_example_instances
from local.serverless_launch import start_job_process
from model.config import ConfigError, JobConfig
from producer.local_run import instance_dir, job_config_path

# make run --declare writes a copy of cdk.json into the work dir and runs the
# job from it; a start afterwards must run the same declaration.
DECLARED_COPY: Final = "cdk.json"
LOG_FILE: Final = "job.log"


def declaration(work_dir: Path, default: Path = CDK_JSON) -> Path:
    """The cdk.json the run's jobs were built from: the run's copy if it made one."""
    copy = work_dir / DECLARED_COPY
    return copy if copy.is_file() else default


def instance_of(instance_id: str, cdk_json: Path) -> Any:
    found = [i for i in load_example_instances(cdk_json) if i.instance_id == instance_id]
    if not found:
        raise ValueError(f"--instance {instance_id!r}: not declared in {cdk_json}")
    return found[0]


def start(work_dir: Path, instance_id: str, cdk_json: Path | None = None) -> int:
    """Start the job of ``instance_id`` in the run at ``work_dir``; its pid."""
    path = job_config_path(work_dir, instance_id)
    if not path.is_file():
        raise ValueError(f"--instance {instance_id!r}: no local run under {work_dir} (no {path})")
    config = JobConfig.from_json(path.read_text(encoding="utf-8"), str(path))
    instance = instance_of(instance_id, cdk_json or declaration(work_dir))
    log_path = instance_dir(work_dir, instance_id) / LOG_FILE
    return start_job_process(instance, config, path, log_path).pid


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m local.start_job", description=__doc__.split("\n")[0]
    )
    p.add_argument("--work-dir", type=Path, required=True)
    p.add_argument("--instance", required=True)
    p.add_argument("--cdk-json", type=Path, help="default: the run's copy, else ./cdk.json")
    args = p.parse_args(argv)
    try:
        pid = start(args.work_dir, args.instance, args.cdk_json)
    except (ValueError, ConfigError, OSError) as exc:
        print(f"start-job: {exc}", file=sys.stderr)
        return 2
    print(pid, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
