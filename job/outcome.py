"""How the job ends: its exit codes, the reason each stands for, the
:class:`Outcome` written as the exit record, and the process's status per
platform (:func:`process_status`).

Exit codes (:class:`ExitCode`; the step is submitted with
``waitAppCompletion=false``, so on EMR a dead job shows as the YARN application
failing and the missing-heartbeat alarm firing; locally and in tests the exit
code is what is checked).

Whatever the code, once the configuration is read the job also writes why it
stopped to ``<checkpoint>/_exit`` (:mod:`model.exit_record`, best effort): the
supervisor and ``make status`` read the reason there, not in the logs.

On EMR Serverless (``--platform serverless``, the job run's entry-point
arguments) the process ends exit 2 with status 0 instead: see
:func:`process_status`. Every other code, the lease, the stop marker and the
exit record are the same on both platforms.
"""

from __future__ import annotations

import logging
import os
import socket
import time
from dataclasses import dataclass
from enum import IntEnum, StrEnum
from typing import Final

from model import contract
from model.exit_record import ExitRecord, shorten

log = logging.getLogger(__name__)


class ExitCode(IntEnum):
    """The job's process exit codes. Each stands for the reason written when
    nothing more precise is known (:attr:`reason`); an int, so it is the
    process's status as it is."""

    # Stopped on request (SIGTERM/SIGINT or the stop marker), between batches.
    OK = 0
    # The query failed (an exception in a batch; the cause is logged).
    QUERY_FAILED = 1
    # The configuration is invalid or unreadable (the message names the
    # field), or the checkpoint holds state this job cannot resume (the old
    # dropDuplicatesWithinWatermark operator's: the message names the
    # checkpoint, what it holds and the fix, :mod:`model.checkpoint_state`).
    BAD_CONFIG = 2
    # Another copy holds the instance's lease: refused to start.
    LEASE_HELD = 3
    # The lease was lost while running (another copy took it, or it expired).
    LEASE_LOST = 4

    @property
    def reason(self) -> str:
        """The exit record's reason for this code (a ``model.contract`` name)."""
        return _REASON_OF_CODE[self]


class Platform(StrEnum):
    """Where the job runs (``--platform``): a step on an EMR cluster, or an
    EMR Serverless job run (:func:`process_status`)."""

    EMR = "emr"
    SERVERLESS = "serverless"


_REASON_OF_CODE: Final = {
    ExitCode.OK: contract.EXIT_STOPPED_ON_REQUEST,
    ExitCode.QUERY_FAILED: contract.EXIT_BATCH_FAILED,
    ExitCode.BAD_CONFIG: contract.EXIT_CONFIG_REFUSED,
    ExitCode.LEASE_HELD: contract.EXIT_LEASE_REFUSED,
    ExitCode.LEASE_LOST: contract.EXIT_LEASE_LOST,
}


@dataclass
class Outcome:
    """Why the job is ending, filled in where that is known (the exception
    caught, the loop that saw the stop) and written as the exit record."""

    reason: str = ""
    detail: str = ""
    stopped_by: str | None = None

    def set(self, reason: str, detail: str, stopped_by: str | None = None) -> None:
        self.reason, self.detail, self.stopped_by = reason, detail, stopped_by

    def record(self, code: ExitCode) -> ExitRecord:
        reason = self.reason or code.reason
        return ExitRecord(
            code=int(code),
            reason=reason,
            detail=shorten(self.detail),
            at=time.time(),
            owner=f"{socket.gethostname()}:{os.getpid()}",
            stopped_by=self.stopped_by if reason == contract.EXIT_STOPPED_ON_REQUEST else None,
        )


def process_status(code: ExitCode, platform: str) -> int:
    """The process's exit status for the job's exit ``code`` on ``platform``.

    EMR Serverless retries a STREAMING job run that fails, up to
    ``retryPolicy.maxFailedAttemptsPerHour`` ("Job resiliency": "automatically
    restarts a job if it fails";
    https://docs.aws.amazon.com/emr/latest/EMR-Serverless-UserGuide/jobs-resiliency.html),
    and a Spark job run whose driver exits 0 ends in state SUCCESS ("Job run
    states": "Success: the job run has completed successfully";
    https://docs.aws.amazon.com/emr/latest/EMR-Serverless-UserGuide/job-states.html),
    which is not a failure and so not retried. A refused configuration or
    checkpoint (exit 2) cannot be cured by a restart, so on serverless it ends
    with status 0: the run shows SUCCESS, the service does not start it again,
    and the exit record (written before, code 2, reason config_refused or
    checkpoint_refused) is what tells the supervisor and ``make status`` why.
    Every other code is the process's status on both platforms: 1 and 4 (and 3)
    fail the run, which the service retries within its budget; 0 is a stop on
    request, left alone."""
    if platform == Platform.SERVERLESS and code == ExitCode.BAD_CONFIG:
        log.error(
            "exit %d (refused; see the exit record): ending the EMR Serverless job run with "
            "status 0 so that its retry policy does not start it again",
            code,
        )
        return ExitCode.OK
    return code
