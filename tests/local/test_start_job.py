"""local.start_job: which declaration a restarted local job is built from,
and a missing run or instance named in one line (exit 2)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from local import start_job
from tests.fixtures import EXAMPLE_CDK_JSON
from tests.scripts.local_runs import INSTANCE, write_local_run


def test_the_runs_own_declaration_wins(tmp_path: Path) -> None:
    assert start_job.declaration(tmp_path, EXAMPLE_CDK_JSON) == EXAMPLE_CDK_JSON
    shutil.copyfile(EXAMPLE_CDK_JSON, tmp_path / "cdk.json")
    assert start_job.declaration(tmp_path, EXAMPLE_CDK_JSON) == tmp_path / "cdk.json"


def test_the_instance_is_read_from_the_declaration() -> None:
    assert start_job.instance_of(INSTANCE, EXAMPLE_CDK_JSON).instance_id == INSTANCE
    with pytest.raises(ValueError, match="'x-eu-west-1': not declared in"):
        start_job.instance_of("x-eu-west-1", EXAMPLE_CDK_JSON)


@pytest.mark.parametrize(
    ("instance", "said"),
    [
        ("orders-eu-west-1", "no local run under"),
        (INSTANCE, "expected a non-empty list of instances"),
    ],
)
def test_a_missing_run_or_instance_exits_2_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], instance: str, said: str
) -> None:
    write_local_run(tmp_path)
    empty = tmp_path / "empty.json"
    empty.write_text('{"context": {"streaming": {"instances": []}}}', encoding="utf-8")
    code = start_job.main(
        ["--work-dir", str(tmp_path), "--instance", instance, "--cdk-json", str(empty)]
    )
    err = capsys.readouterr().err
    assert code == 2 and said in err and len(err.strip().splitlines()) == 1, err
