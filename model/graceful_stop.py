"""Graceful stop: a marker object or a signal asks the job to finish its batch and exit 0.

The marker lets an operator or the next job version stop a running job on
another machine (EMR) without killing it mid-batch; the signal handler covers
YARN's SIGTERM and Ctrl-C.
"""

from __future__ import annotations

import logging
import signal
import threading
from pathlib import Path
from types import FrameType
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from model.contract import STOP_BY_HANDOVER, STOP_BY_OPERATOR
from model.storage_uri import is_missing, is_s3, local_path, parse_s3_uri, read_object

log = logging.getLogger(__name__)


class StopMarker:
    """A file or S3 object whose presence asks the job to stop gracefully.

    The job deletes it once it has stopped, so the next version can start
    (the EMR step's launcher, ``bootstrap/streaming-spark-submit.sh``, puts the
    marker, waits for the old application to leave YARN, then submits)."""

    def __init__(self, path: str, s3_client: Any = None) -> None:
        self.path = path
        self._s3 = s3_client

    def present(self) -> bool:
        if is_s3(self.path):
            bucket, key = parse_s3_uri(self.path)
            try:
                self._s3.head_object(Bucket=bucket, Key=key)
            except ClientError as exc:
                if not is_missing(exc):
                    log.warning("stop marker check failed: %s", exc)
                return False
            except BotoCoreError as exc:
                log.warning("stop marker check failed: %s", exc)
                return False
            return True
        return Path(local_path(self.path)).exists()

    def requester(self) -> str:
        """Who wrote the marker: its first word is ``handover`` when a deploy's
        launcher asked (bootstrap/streaming-spark-submit.sh); anything else
        (``make stop-job``, an empty object from ``aws s3 cp /dev/null``) is an
        operator, whose stop the supervisor honours until the job is started again."""
        try:
            body = read_object(self.path, self._s3)
        except Exception as exc:  # gone meanwhile, or unreadable: the safe answer
            log.warning("stop marker %s unreadable (%s); taken as an operator's", self.path, exc)
            return STOP_BY_OPERATOR
        words = body.decode("utf-8", errors="replace").split()
        return STOP_BY_HANDOVER if words[:1] == [STOP_BY_HANDOVER] else STOP_BY_OPERATOR

    def consume(self) -> None:
        if is_s3(self.path):
            bucket, key = parse_s3_uri(self.path)
            self._s3.delete_object(Bucket=bucket, Key=key)
        else:
            Path(local_path(self.path)).unlink(missing_ok=True)


class StopRequest:
    """SIGTERM/SIGINT -> a flag the main loop polls (handlers must stay tiny)."""

    def __init__(self) -> None:
        self.event = threading.Event()
        self.reason = ""
        # Who asked (model.contract.STOP_BY_*): a signal is an operator's (YARN's
        # kill, Ctrl-C); a stop marker says itself.
        self.by = STOP_BY_OPERATOR

    def request(self, reason: str, by: str = STOP_BY_OPERATOR) -> None:
        if not self.event.is_set():
            self.reason = reason
            self.by = by
            self.event.set()

    def install(self) -> None:
        def handler(signum: int, _frame: FrameType | None) -> None:
            self.request(f"signal {signal.Signals(signum).name}")

        signal.signal(signal.SIGTERM, handler)
        signal.signal(signal.SIGINT, handler)
