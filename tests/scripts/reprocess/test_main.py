"""scripts.reprocess.__main__: the command line (flags, usage errors, the names it
takes from the instance configuration)."""

from __future__ import annotations

import json

import pytest

from scripts.reprocess import __main__ as reprocess
from scripts.reprocess.plan import Selection
from tests.fixtures import EXAMPLE_CDK_JSON

CDK_JSON = EXAMPLE_CDK_JSON


# ------------------------------------------------------------------ the command line


def usage(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    code = reprocess.main(["--cdk-json", str(CDK_JSON), "--kafka-bootstrap", "127.0.0.1:1", *argv])
    assert code == reprocess.EXIT_USAGE
    return capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--instance", "orders-mars-1"], "'orders-mars-1': not declared in"),
        (["--instance", "orders-eu-west-1", "--reason", "bad"], "--reason 'bad': not a failure"),
        (["--instance", "orders-eu-west-1", "--from-time", "2026-01-01T00:00:00"], "no UTC offset"),
        (["--instance", "orders-eu-west-1", "--from-offset", "a:b"], "--from-offset 'a:b'"),
        (["--instance", "orders-eu-west-1", "--fix", "nowhere_module_x:f"], "cannot import"),
        (
            ["--instance", "orders-eu-west-1", "--from-time", "2026-01-02T00:00:00Z",
             "--to-time", "2026-01-01T00:00:00Z"],
            "must be before --to-time",
        ),
    ],
)  # fmt: skip
def test_bad_arguments_exit_2_with_the_field(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert message in usage(argv, capsys)


def test_names_come_from_the_instance_configuration() -> None:
    args = reprocess.parse_args(
        ["--instance", "orders-eu-west-1", "--cdk-json", str(CDK_JSON), "--kafka-bootstrap", "b:1"]
    )
    options = reprocess.options_from_args(args, now_ms=5_000)
    assert options.instance.stream_name == "streaming-orders-eu-west-1"
    assert options.instance.failure_topic_name == "streaming.orders.eu-west-1.failures"
    assert options.group == "reprocess-orders-eu-west-1"
    assert options.selection == Selection(frozenset(), None, 5_000)
    assert options.security == "PLAINTEXT"
    msk = reprocess.parse_args(
        ["--instance", "orders-eu-west-1", "--cdk-json", str(CDK_JSON), "--msk-cluster-arn", "a"]
    )
    assert reprocess.options_from_args(msk, now_ms=0).security == "MSK_IAM"
    # The instance came from the example file itself (not a copy): it declares it.
    declared = json.loads(CDK_JSON.read_text())["context"]["streaming"]["instances"]
    assert ("orders", "eu-west-1") in {(i["domain"], i["region"]) for i in declared}
