"""bench/requests.py's own pieces (the run itself takes minutes of Spark and is
not a CI test): the job's process tree strace attaches to, the state store's
partitions it divides by, and the default instances it measures, one per target."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from bench import requests
from infra.cost.requests import Count, TargetCounts
from local.harness import load_example_instances, select_instances
from model.polling import poll_until


def test_the_process_tree_holds_the_children_started_after_the_root() -> None:
    parent = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import subprocess, sys; "
            "subprocess.run([sys.executable, '-c', 'import sys; sys.stdin.read()'])",
        ],
        stdin=subprocess.PIPE,
    )
    try:
        poll_until(
            lambda: len(requests.process_tree(parent.pid)) == 2,
            timeout=30,
            interval=0.05,
            on_timeout=lambda: AssertionError(requests.process_tree(parent.pid)),
        )
        assert requests.process_tree(parent.pid)[0] == parent.pid
    finally:
        parent.kill()
        parent.wait()


def test_the_state_partitions_are_the_state_stores_numbered_directories(tmp_path: Path) -> None:
    assert requests._state_partitions(tmp_path) == 1  # none yet: the divisor stays 1
    for name in ("0", "1", "2", "_metadata"):
        (tmp_path / "state" / "0" / name).mkdir(parents=True)
    assert requests._state_partitions(tmp_path) == 3


def test_the_default_instances_are_one_emr_and_one_serverless() -> None:
    chosen = select_instances(load_example_instances(), list(requests.DEFAULT_INSTANCES))
    assert sorted(i.compute for i in chosen) == ["emr", "serverless"]


def test_the_printed_table_names_every_count() -> None:
    counts = TargetCounts(
        "emr", "orders", 10, 3, "2026-12-07", (Count("glue", "GetTable", "", 2.0),), 7.0
    )
    text = requests._render(counts)
    assert "10 batches after 3 cold ones; serial 7.0" in text
    assert "GetTable" in text and "2.00" in text


def test_analyse_counts_the_window_of_a_runs_logs_per_batch(tmp_path: Path) -> None:
    """From what a run leaves (its window, strace's log, moto's log): the
    job's requests inside the window over its batches; the producer's puts
    and whatever falls outside the window are left out."""
    root = tmp_path / "orders"
    root.mkdir()
    window = {
        "target": "emr",
        "instance": "orders",
        "start": 10.0,
        "end": 20.0,
        "batches": 2,
        "cold": 3,
        "subscriptions": 0,
        "efo": False,
        "partitions": 1,
        "shards": 1,
        "measured": "2026-12-07",
    }
    (root / requests.WINDOW_FILE).write_text(json.dumps(window))
    commit = f'AT_FDCWD, "{root}/checkpoint/commits/.4.tmp", O_WRONLY|O_CREAT, 0644'
    (root / "strace.log").write_text(
        f"7 11.0 openat({commit}) = 3\n7 15.0 openat({commit}) = 3\n7 25.0 openat({commit}) = 3\n"
    )
    moto = tmp_path / "moto.log"
    moto.write_text(
        "\n".join(
            json.dumps({"t": t, "service": service, "api": api})
            for t, service, api in (
                (12.0, "kinesis", "GetRecords"),
                (13.0, "kinesis", "PutRecords"),
                (14.0, "monitoring", "PutMetricData"),
                (30.0, "kinesis", "GetRecords"),
            )
        )
    )
    counted = requests.analyse(root, moto)
    assert {(c.service, c.api, c.prefix): c.per_batch for c in counted.counts} == {
        ("kinesis", "GetRecords", ""): 0.5,
        ("monitoring", "PutMetricData", ""): 0.5,
        ("s3", "PutObject", "checkpoint"): 1.0,
    }
    assert counted.serial == 0.5 + 1.0  # PutMetricData is off the path
