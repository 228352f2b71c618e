"""Lambda handler (inline source of a custom resource): on stack delete, revoke
the rules by which the EMR-managed security groups reference each other.

EMR adds rules between its managed groups when a cluster starts
(https://docs.aws.amazon.com/emr/latest/ManagementGuide/emr-man-sec-groups.html);
those rules are not CloudFormation's, and deleting a group that another group
references fails with DependencyViolation
(https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_DeleteSecurityGroup.html).
Runs after the cluster is terminated (the cluster depends on this resource).
Failures are logged and reported as success: a stuck delete helps nobody.
"""

import json
import urllib.request
from typing import Any

import boto3


def revoke_cross_references(ec2: Any, group_ids: list[str]) -> int:
    """Revoke every ingress/egress rule of ``group_ids`` that names one of them."""
    revoked = 0
    found = ec2.describe_security_groups(Filters=[{"Name": "group-id", "Values": group_ids}])[
        "SecurityGroups"
    ]
    for group in found:
        for key, revoke in (
            ("IpPermissions", ec2.revoke_security_group_ingress),
            ("IpPermissionsEgress", ec2.revoke_security_group_egress),
        ):
            for rule in group.get(key, []):
                pairs = [p for p in rule.get("UserIdGroupPairs", []) if p["GroupId"] in group_ids]
                if not pairs:
                    continue
                perm = {k: v for k, v in rule.items() if k in ("IpProtocol", "FromPort", "ToPort")}
                perm["UserIdGroupPairs"] = [{"GroupId": p["GroupId"]} for p in pairs]
                revoke(GroupId=group["GroupId"], IpPermissions=[perm])
                revoked += len(pairs)
    return revoked


def _respond(event: dict[str, Any], status: str, reason: str) -> None:
    body = json.dumps(
        {
            "Status": status,
            "Reason": reason[:500],
            "PhysicalResourceId": event.get("PhysicalResourceId") or event["LogicalResourceId"],
            "StackId": event["StackId"],
            "RequestId": event["RequestId"],
            "LogicalResourceId": event["LogicalResourceId"],
        }
    ).encode()
    request = urllib.request.Request(event["ResponseURL"], data=body, method="PUT")
    request.add_header("Content-Type", "")
    with urllib.request.urlopen(request, timeout=30):
        pass


def handler(event: dict[str, Any], _context: Any) -> None:
    reason = "nothing to do"
    if event["RequestType"] == "Delete":
        try:
            ids = list(event["ResourceProperties"]["GroupIds"])
            reason = f"revoked {revoke_cross_references(boto3.client('ec2'), ids)} rules"
        except Exception as exc:
            reason = f"cleanup failed, groups may need manual cleanup: {exc}"
    print(reason)
    _respond(event, "SUCCESS", reason)
