"""Stop an instance's job gracefully: ``make stop-job INSTANCE=<domain-region> [ARGS=...]``.

Writes the job's stop marker (``stop_marker_path`` of the job's own config: a
file beside a local run's checkpoint, an object in the data bucket on AWS; see
:mod:`scripts.status.target` for where the config comes from) and waits, at
most ``--timeout`` seconds, for the job to exit. The job checks the marker
every ``stop_poll_interval_sec``, stops between batches (a running batch
finishes and commits), deletes the marker and releases its lease
(:mod:`job.driver`, :mod:`model.graceful_stop`).

"Exited" is read from the job's lease (:mod:`scripts.status.lease`), the same
way locally and on EMR: free, and locally the last holder's process gone. The
EMR step says nothing here: it completes once YARN has accepted the job.

A job that is not running gets no marker: a marker left behind would stop
the next start of the job at its first check.

How it ended is read from the job's exit record (``<checkpoint>/_exit``,
:mod:`job.outcome`) when the job wrote one after the marker: a stop on request
(by whom), or the failure that ended it first. Only a job that wrote none
(killed) is judged by the marker alone.

Exit codes: 0 the job stopped (or was not running); 1 the job exited
otherwise (its exit record's reason, or, without one, it did not take the
marker: it failed or was killed meanwhile; the marker stays, so the
supervisor leaves it stopped until ``make start-job``); 2 bad arguments
(checked before anything is written: a negative ``--timeout``, a
``--poll-sec`` not above 0), unknown instance, unreachable endpoint, no stop
marker in the config; 4 still running after ``--timeout`` (the marker stays: the job
still stops at its next check; ``graceful_stop_timeout_sec`` bounds a batch
that will not finish); 5 another AWS call failed.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Final

from model import contract
from model.config import JobConfig
from model.exit_record import ExitRecord, ExitRecordError, read_exit_record
from model.graceful_stop import StopMarker
from model.polling import wait_for
from model.storage_uri import is_s3, local_path, parse_s3_uri
from scripts.command import EXIT_USAGE, OperatorError
from scripts.status.lease import JobState, job_state, process_alive
from scripts.status.target import Target, target_arguments, target_command, wait_arguments

EXIT_STOPPED: Final = 0
EXIT_NOT_TAKEN: Final = 1
EXIT_TIMEOUT: Final = 4
# Any first word but "handover" is an operator's stop
# (model.graceful_stop.StopMarker.requester): the job records it so, and the
# supervisor leaves the job stopped until it is started again.
MARKER_TEXT: Final = "stop\n"
STAYS_STOPPED: Final = (
    "the marker stays: the supervisor leaves the job stopped until make start-job starts it again"
)


class Marker(StopMarker):
    """The job's own stop marker (:class:`model.graceful_stop.StopMarker`: the
    job checks it and consumes it), plus what only an operator does: write it."""

    def write(self) -> None:
        if is_s3(self.path):
            bucket, key = parse_s3_uri(self.path)
            self._s3.put_object(Bucket=bucket, Key=key, Body=MARKER_TEXT.encode())
            return
        path = Path(local_path(self.path))
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(MARKER_TEXT, encoding="utf-8")


def exited(state: JobState, pid: int | None, alive: Callable[[int], bool]) -> bool:
    """The job has exited: its lease is free and the process that held it
    (when it ran on this host) is gone. Pure given ``alive``."""
    return not state.running and (pid is None or not alive(pid))


def stop(
    target: Target,
    *,
    timeout: float,
    poll_sec: float,
    log: Callable[[str], None],
    clock: Callable[[], float] = time.time,
) -> int:
    config = target.config
    if config.stop_marker_path is None:
        raise OperatorError(
            EXIT_USAGE, f"{target.origin}: the job config has no stop_marker_path to write"
        )
    s3 = target.client("s3")
    before = job_state(config, s3, clock())
    if not before.running:
        log(f"{target.instance_id}: job {before.line()}; nothing to stop, no marker written")
        return EXIT_STOPPED
    marker = Marker(config.stop_marker_path, s3)
    since = clock()
    marker.write()
    started = time.monotonic()
    log(f"{target.instance_id}: job {before.line()}; stop marker written to {marker.path}")
    if timeout <= 0:
        return EXIT_STOPPED
    pid = before.local_pid
    last = [before]

    def done() -> bool:
        last[0] = job_state(config, s3, clock())
        return exited(last[0], pid, process_alive)

    if not wait_for(done, timeout=timeout, interval=poll_sec):
        log(
            f"{target.instance_id}: job still {last[0].line()} after {timeout:.0f}s; the marker "
            f"stays, the job stops at its next check (every {config.stop_poll_interval_sec}s, "
            f"a running batch finishing within graceful_stop_timeout_sec="
            f"{config.graceful_stop_timeout_sec})"
        )
        return EXIT_TIMEOUT
    seconds = time.monotonic() - started
    record = fresh_exit(config, s3, since)
    stays = marker.present()
    if record is not None:
        return _report_exit(target.instance_id, record, seconds, stays, log)
    if stays:
        # The operator's stop stands: the marker stays, so the supervisor
        # leaves the job stopped (it died before recording why); only a
        # deliberate new start (make start-job, or make redeploy: its launcher
        # clears it) runs it.
        log(
            f"{target.instance_id}: job exited after {seconds:.1f}s without taking the stop "
            "marker and without an exit record (it failed or was killed meanwhile; see its "
            f"log); {STAYS_STOPPED}"
        )
        return EXIT_NOT_TAKEN
    log(f"{target.instance_id}: job stopped gracefully after {seconds:.1f}s")
    return EXIT_STOPPED


def fresh_exit(config: JobConfig, s3: Any, since: float) -> ExitRecord | None:
    """The job's exit record (:mod:`model.exit_record`) if written at or after
    ``since`` (epoch seconds): how the run that was asked to stop ended. None
    when it wrote none (killed) or one that does not parse."""
    try:
        record = read_exit_record(config.checkpoint_location, s3)
    except ExitRecordError:
        return None
    return record if record is not None and record.at >= since else None


def _report_exit(
    instance: str, record: ExitRecord, seconds: float, stays: bool, log: Callable[[str], None]
) -> int:
    """What the job's own exit record says happened, and the exit code it means."""
    left = f"; {STAYS_STOPPED}" if stays else ""
    if record.reason == contract.EXIT_STOPPED_ON_REQUEST:
        log(f"{instance}: job stopped gracefully after {seconds:.1f}s ({record.line()}){left}")
        return EXIT_STOPPED
    log(f"{instance}: job exited after {seconds:.1f}s, not on the stop: {record.line()}{left}")
    return EXIT_NOT_TAKEN


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m scripts.stop", description=__doc__.split("\n")[0])
    target_arguments(p)
    wait_arguments(p, "--timeout", 300.0, "the job to exit", "write the marker only", poll=1.0)
    return p


def main(argv: Sequence[str] | None = None, out: Any = None) -> int:
    def act(target: Target, args: argparse.Namespace, say: Callable[[str], None]) -> int:
        return stop(target, timeout=args.timeout, poll_sec=args.poll_sec, log=say)

    return target_command("stop", parser(), act, argv, out)


if __name__ == "__main__":
    sys.exit(main())
