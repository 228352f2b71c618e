"""``model.graceful_stop``: the stop marker (a local file or an S3 object on moto
in-process) and the signal that sets the stop request (unit tier)."""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

from model.graceful_stop import StopMarker, StopRequest


def test_stop_marker_local_and_s3(tmp_path: Path, s3: Any, bucket: str) -> None:
    local = StopMarker(str(tmp_path / "stop"))
    assert not local.present()
    (tmp_path / "stop").write_text("")
    assert local.present()
    local.consume()
    assert not local.present()

    remote = StopMarker(f"s3://{bucket}/markers/stop", s3)
    assert not remote.present()
    s3.put_object(Bucket=bucket, Key="markers/stop", Body=b"")
    assert remote.present()
    remote.consume()
    assert not remote.present()


def test_sigterm_sets_the_stop_request() -> None:
    stop = StopRequest()
    previous = signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)
    stop.install()
    try:
        os.kill(os.getpid(), signal.SIGTERM)
        assert stop.event.wait(timeout=5)
        assert stop.reason == "signal SIGTERM"
    finally:
        signal.signal(signal.SIGTERM, previous[0])
        signal.signal(signal.SIGINT, previous[1])
