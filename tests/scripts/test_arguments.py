"""Every operator command checks its numbers when it parses its command line
(:mod:`producer.arguments`): a bad one exits 2 before anything is read or
written. Each case runs the command's real ``main`` in an
empty directory, with a work dir there, and finds it still empty."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from local import __main__ as local_run
from producer import producer
from scripts import migrate_checkpoint, produce, redeploy, start, stop
from scripts.reprocess import __main__ as reprocess
from scripts.status import __main__ as status

Main = Callable[[Sequence[str]], Any]
TARGET = ("--instance", "orders-eu-west-1", "--work-dir", "run")
DECLARED = ("--instance", "orders-eu-west-1")
STREAM = ("--stream", "s", "--region", "eu-west-1")
REPROCESS = (*DECLARED, "--kafka-bootstrap", "h:1")

# (command, main, the arguments it needs anyway, the refused option, its value)
CASES: list[tuple[str, Main, tuple[str, ...], str, str]] = [
    ("stop-job", stop.main, TARGET, "--timeout", "-1"),
    ("stop-job", stop.main, TARGET, "--poll-sec", "-0.1"),
    ("start-job", start.main, TARGET, "--wait-sec", "-1"),
    ("start-job", start.main, TARGET, "--poll-sec", "0"),
    ("redeploy", redeploy.main, DECLARED, "--wait-sec", "-5"),
    ("redeploy", redeploy.main, DECLARED, "--poll-sec", "0"),
    ("status", status.main, TARGET, "--batches", "-1"),
    ("status", status.main, TARGET, "--metrics-minutes", "0"),
    ("status", status.main, TARGET, "--metrics-period", "-60"),
    ("status", status.main, TARGET, "--scan-calls", "0"),
    ("status", status.main, TARGET, "--scan-records", "-1"),
    ("status", status.main, TARGET, "--tip-window-sec", "-1"),
    ("migrate-checkpoint", migrate_checkpoint.main, TARGET, "--max-attempts", "0"),
    ("produce", produce.main, TARGET, "--count", "-1"),
    ("produce", produce.main, TARGET, "--rate", "-10"),
    ("produce", produce.main, TARGET, "--malformed-share", "1.5"),
    ("produce", produce.main, TARGET, "--duplicate-share", "-0.1"),
    ("produce", produce.main, TARGET, "--undeclared-share", "2"),
    ("produce", produce.main, TARGET, "--too-large-bytes", "-1"),
    ("produce", produce.main, TARGET, "--aggregate", "-2"),
    ("produce", produce.main, TARGET, "--aggregate-share", "1.01"),
    ("producer.producer", producer.main, STREAM, "--count", "-3"),
    ("producer.producer", producer.main, (*STREAM, "--create"), "--shards", "0"),
    ("reprocess", reprocess.main, REPROCESS, "--batch-records", "0"),
    ("reprocess", reprocess.main, REPROCESS, "--batch-records", "501"),
    ("reprocess", reprocess.main, REPROCESS, "--rate", "-1"),
    ("reprocess", reprocess.main, REPROCESS, "--max-attempts", "0"),
    ("run", local_run.main, (), "--count", "-1"),
    ("run", local_run.main, (), "--rate", "-1"),
    ("run", local_run.main, (), "--progress-every", "0"),
    ("run", local_run.main, (), "--malformed-share", "3"),
]


@pytest.mark.parametrize(
    ("main", "argv", "refused"),
    [
        pytest.param(main, (*needed, option, value), option, id=f"{name} {option} {value}")
        for name, main, needed, option, value in CASES
    ],
)
def test_a_refused_number_exits_2_and_writes_nothing(
    main: Main,
    argv: tuple[str, ...],
    refused: str,
    *,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "run").mkdir()
    with pytest.raises(SystemExit) as exited:
        main(list(argv))
    assert exited.value.code == 2
    assert f"argument {refused}: " in capsys.readouterr().err
    assert [p.name for p in tmp_path.rglob("*")] == ["run"]


def test_every_numeric_option_of_the_commands_is_checked() -> None:
    """No option of these commands takes a bare ``int`` or ``float``: each
    goes through an :mod:`producer.arguments` type (what the cases above rely on)."""

    parsers: dict[str, argparse.ArgumentParser] = {
        "stop-job": stop.parser(),
        "start-job": start.parser(),
        "redeploy": redeploy.parser(),
        "status": status.parser(),
        "migrate-checkpoint": migrate_checkpoint.parser(),
        "produce": produce.parser(),
    }
    bare = [
        f"{name} {action.option_strings[0]}"
        for name, parser in parsers.items()
        for action in parser._actions
        if action.type in (int, float) and action.dest != "seed"  # any integer seeds
    ]
    assert bare == []
