"""``python -m scripts.status``: the whole command on a local run, and its errors
(unknown instance, unreachable endpoint, missing checkpoint or stream)."""

from __future__ import annotations

import io
import json
import socket
from pathlib import Path

import pytest

from scripts.status import __main__ as status
from tests.fixtures import EXAMPLE_CDK_JSON
from tests.scripts.local_runs import (
    INSTANCE,
    SHARD0,
    SHARD1,
    STREAM,
    make_stream,
    put,
    shards_offset,
    write_batch,
    write_local_run,
)

# ------------------------------------------------------------------ the command


def test_status_of_a_local_run(tmp_path: Path, aws: None) -> None:
    config = write_local_run(tmp_path)
    kinesis = make_stream()
    seqs0 = put(kinesis, SHARD0, 5)
    seqs1 = put(kinesis, SHARD1, 4)
    write_batch(Path(config.checkpoint_location), 0, shards_offset(s0=seqs0[1], s1=seqs1[-1]))
    out = io.StringIO()
    code = status.main(["--instance", INSTANCE, "--work-dir", str(tmp_path), "--json"], out)
    assert code == 0
    report = json.loads(out.getvalue())
    by_shard = {s["shard"]["shard_id"]: s for s in report["shards"]}
    assert by_shard[SHARD0]["tip"] == seqs0[-1] and by_shard[SHARD0]["lag"]["records"] == 3
    assert by_shard[SHARD1]["tip"] == seqs1[-1] and by_shard[SHARD1]["lag"]["records"] == 0
    assert report["total_lag"] == {**report["total_lag"], "records": 3, "exact": True}
    assert report["checkpoint"]["batches"] == {"committed": 0, "planned": None}
    assert report["job"]["running"] is False and report["table"] is None
    text = io.StringIO()
    assert status.main(["--instance", INSTANCE, "--work-dir", str(tmp_path)], text) == 0
    printed = text.getvalue()
    assert f"after {seqs0[1]}" in printed and "batch 0 committed" in printed
    assert "not created yet" in printed and "none found" in printed
    assert "table optimizers (Glue, " in printed and "not available locally" in printed
    assert report["optimizers"] == {**report["optimizers"], "available": False, "states": []}


def test_unknown_instance_lists_the_known_ones(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert status.main(["--instance", "nope-eu-west-1"]) == 2
    err = capsys.readouterr().err
    assert (
        f"'nope-eu-west-1': not declared in {EXAMPLE_CDK_JSON}; declared: orders-ap-northeast-2"
    ) in err
    write_local_run(tmp_path)
    assert status.main(["--instance", "payments-ap-northeast-2", "--work-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert f"no local run under {tmp_path}" in err and f"instances run there: {INSTANCE}" in err
    assert len(err.strip().splitlines()) == 1


def test_unreachable_endpoint_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    write_local_run(tmp_path)
    code = status.main(["--instance", INSTANCE, "--work-dir", str(tmp_path), "--endpoint-url", url])
    err = capsys.readouterr().err
    assert code == 2 and f"endpoint {url}/ unreachable" in err, err


def test_missing_checkpoint_and_missing_stream_are_named(
    tmp_path: Path, aws: None, capsys: pytest.CaptureFixture[str]
) -> None:
    config = write_local_run(tmp_path)
    assert status.main(["--instance", INSTANCE, "--work-dir", str(tmp_path)]) == 2
    assert f"stream {STREAM}: not found" in capsys.readouterr().err
    make_stream()
    assert status.main(["--instance", INSTANCE, "--work-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert f"checkpoint {config.checkpoint_location}: missing" in err
