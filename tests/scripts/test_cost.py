"""``make cost`` on a user's own new domain: a copy of the shipped cdk.json
with ``clicks`` added in us-west-2 (serverless, six fields of its own), a
Region the offline price table has no rows for. The first run tells the table
pin in one line; with it, ``INSTANCE=`` prices only that instance and its
Region's shared stack, and says "not priced" where the table has no price,
exit 0, no traceback."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from infra.config import (
    SELECTION_CONTEXT_KEY,
    SYNTH_CHECK_CONTEXT_KEY,
    InstanceConfigError,
    load_instances,
    read_cdk_context,
)
from scripts import cost

ROOT = Path(__file__).resolve().parents[2]
CLICKS = "clicks-us-west-2"
CLICKS_FIELDS = [
    {"name": "clickId"},
    {"name": "userId"},
    {"name": "page"},
    {"name": "referrer", "required": False},
    {"name": "durationMs", "type": "long"},
    {"name": "clickedAt", "type": "timestamp"},
]


def with_clicks(pin: str | None = None) -> dict[str, Any]:
    """The shipped cdk.json plus the new domain (and its Region's shared stack)."""
    raw: dict[str, Any] = json.loads((ROOT / "cdk.json").read_text(encoding="utf-8"))
    streaming = raw["context"]["streaming"]
    streaming["shared"].append({"region": "us-west-2"})
    entry: dict[str, Any] = {
        "domain": "clicks",
        "region": "us-west-2",
        "size": "small",
        "compute": "serverless",
        "network": {"shared": True},
        "kafka": {"shared": True},
        "expected_load": {"records_per_sec": 50, "record_bytes": 300},
        "job": {
            "event_fields": CLICKS_FIELDS,
            "id_field": "clickId",
            "event_time_field": "clickedAt",
        },
    }
    if pin is not None:
        entry["table_definition_sha256"] = pin
    streaming["instances"].append(entry)
    return raw


def _write(tmp_path: Path, raw: dict[str, Any]) -> Path:
    path = tmp_path / "cdk.json"
    path.write_text(json.dumps(raw, indent=2), encoding="utf-8")
    return path


def the_pin_it_is_told(path: Path) -> str:
    """The first run's one line names the pin to add."""
    with pytest.raises(InstanceConfigError) as raised:
        load_instances(read_cdk_context(path))
    (line,) = str(raised.value).splitlines()
    assert line.startswith(
        "instance instances[3] (clicks/us-west-2): field table_definition_sha256"
    )
    found = re.search(r'allowed: "([0-9a-f]{64})"', line)
    assert found is not None, line
    return found[1]


def test_a_new_domain_with_its_own_fields_is_told_its_pin_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _write(tmp_path, with_clicks())
    pin = the_pin_it_is_told(path)
    assert cost.main(["--cdk-json", str(path), "--instance", CLICKS]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and f'"{pin}"' in err
    (config,) = [
        c
        for c in load_instances(read_cdk_context(_write(tmp_path, with_clicks(pin))))
        if c.instance_id == CLICKS
    ]
    assert config.table_definition_sha256 == pin


def test_an_undeclared_instance_is_named_with_the_declared_ones(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert cost.main(["--cdk-json", str(ROOT / "cdk.json"), "--instance", "nope-us-east-1"]) == 2
    err = capsys.readouterr().err
    assert "--instance nope-us-east-1: declared: orders-ap-northeast-2" in err


def test_make_cost_passes_instance_on() -> None:
    shown = subprocess.run(
        ["make", "-n", "--no-print-directory", "cost", f"INSTANCE={CLICKS}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    assert f'-m scripts.cost --instance "{CLICKS}"' in shown


@pytest.mark.synth
def test_a_region_without_prices_is_not_priced_and_only_its_instance_is_built(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _write(tmp_path, with_clicks())
    path = _write(tmp_path, with_clicks(the_pin_it_is_told(path)))
    assert cost.main(["--cdk-json", str(path), "--instance", CLICKS]) == 0
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err + captured.out
    stacks = re.findall(r"^(Streaming-\S+) \(", captured.out, re.MULTILINE)
    assert stacks == ["Streaming-clicks-us-west-2", "Streaming-shared-us-west-2"]
    assert re.search(
        r"Streaming-clicks-us-west-2 \(us-west-2\)\n  not priced: no price for '[a-z:.-]+' "
        r"in us-west-2",
        captured.out,
    ), captured.out
    # Beside it, the advised shape on both compute targets (no price rows here).
    assert "  advice at 50 records/s x2 headroom" in captured.out
    assert re.search(r"    emr 1 x m7g\.xlarge core .*: not priced\n", captured.out)
    assert re.search(
        r"    serverless ARM64 1 x 1 vCPU .*: not priced \(its compute\)", captured.out
    )


def _synth(path: Path, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    """``app.py`` as ``npx cdk synth -c streaming:instances=clicks-us-west-2``
    runs it: the CLI hands the context over in CDK_CONTEXT_JSON."""
    context = {
        **read_cdk_context(path),
        SYNTH_CHECK_CONTEXT_KEY: True,
        SELECTION_CONTEXT_KEY: CLICKS,
    }
    env = {
        **os.environ,
        "CDK_CONTEXT_JSON": json.dumps(context),
        "CDK_OUTDIR": str(tmp_path / "cdk.out"),
    }
    return subprocess.run(
        [sys.executable, "app.py"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


@pytest.mark.synth
def test_the_walkthrough_synth_of_the_new_domain_alone(tmp_path: Path) -> None:
    """docs/infra.md, "Add your own domain", steps 2 and 5: the first synth is
    one line naming the pin; with it, the instance and its shared stack only."""
    first = _synth(_write(tmp_path, with_clicks()), tmp_path)
    assert first.returncode == 1
    # jsii's banner about this machine's Node version aside (make silences it).
    (line,) = [x for x in first.stderr.splitlines() if not x.startswith("b'!!")]
    pin = re.search(r'allowed: "([0-9a-f]{64})"', line)
    assert pin is not None and line.startswith("cdk.json: instance instances[3] (clicks/us-west-2)")
    done = _synth(_write(tmp_path, with_clicks(pin[1])), tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Traceback" not in done.stderr
    templates = sorted(p.name for p in (tmp_path / "cdk.out").glob("*.template.json"))
    assert templates == [
        "Streaming-clicks-us-west-2.template.json",
        "Streaming-shared-us-west-2.template.json",
    ]
    assert "cost: Streaming-clicks-us-west-2 not estimated: no price for" in done.stderr
