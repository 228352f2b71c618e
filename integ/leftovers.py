"""``python -m integ.leftovers <instance>``, the last step of ``make integ``:
after the destroy, no stack of the integration instance may be left (the
instance's stack and its assertion stack). With ``removal_policy: DESTROY``
its buckets, table and log groups go with the stack; a stack still there is
reported with its status, so the user knows what to delete by hand."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any, Final

import boto3
from botocore.exceptions import ClientError

from model import contract

GONE: Final = "DELETE_COMPLETE"
ASSERT_PREFIX: Final = "IntegAssert-"


def stack_names(domain: str, region: str) -> list[str]:
    instance = contract.instance_id(domain, region)
    return [contract.stack_name(domain, region), f"{ASSERT_PREFIX}{instance}"]


def left(cloudformation: Any, names: Sequence[str]) -> list[str]:
    """``name: status`` of each stack of ``names`` that still exists."""
    found: list[str] = []
    for name in names:
        try:
            stacks = cloudformation.describe_stacks(StackName=name)["Stacks"]
        except ClientError as exc:
            if "does not exist" in str(exc):
                continue
            raise
        found.extend(f"{name}: {s['StackStatus']}" for s in stacks if s["StackStatus"] != GONE)
    return found


def main(argv: Sequence[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else list(argv)
    if len(args) != 1 or "-" not in args[0]:
        print("usage: python -m integ.leftovers <domain>-<region>", file=sys.stderr)
        return 2
    domain, region = args[0].split("-", 1)
    client = boto3.client("cloudformation", region_name=region)
    found = left(client, stack_names(domain, region))
    for line in found:
        print(f"integ: left behind: {line}")
    if not found:
        print(f"integ: nothing left of {args[0]}")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
