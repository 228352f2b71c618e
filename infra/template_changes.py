"""What CloudFormation would refuse, or silently replace, between two syntheses
of the app: today's templates (``before``, what is deployed) and an edited
``cdk.json``'s (``after``, what ``cdk deploy`` would send).

Pure functions on template dicts (``{stack name: template}``), so a test can
replay a user's edit without an account, and ``make change-check``
(scripts/change_check.py) can run before a deploy. Three rules, each from the
page cited beside it:

* an export that a deployed stack imports cannot be removed or changed
  (:func:`lost_exports`);
* a stateful resource (stream, bucket, Glue database or table, MSK cluster,
  EMR Serverless application, the job-run resource) must keep its logical ID,
  its type and the properties whose change means a replacement: a new logical
  ID is a delete of the old resource and a create of an empty one
  (:func:`replaced_resources`);
* a custom resource's ``ServiceToken`` cannot be updated (:func:`replaced_resources`).

A stack of ``before`` that ``after`` lacks is not updated by the deploy (it was
removed from ``cdk.json`` or not selected): it stays deployed, and its imports
still bind the exporting stack.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Final

Templates = Mapping[str, Mapping[str, Any]]

IMPORT_VALUE_PAGE: Final = (
    "https://docs.aws.amazon.com/AWSCloudFormation/latest/TemplateReference/"
    "intrinsic-function-reference-importvalue.html"
)
_RESOURCE_PAGE: Final = "https://docs.aws.amazon.com/AWSCloudFormation/latest/TemplateReference/"
# Stateful resource types, with the properties whose change requires a
# replacement ("Update requires: Replacement" on each type's page, named after it).
STATEFUL: Final[Mapping[str, tuple[str, ...]]] = {
    "AWS::Kinesis::Stream": ("Name",),  # aws-resource-kinesis-stream.html
    "AWS::S3::Bucket": ("BucketName",),  # aws-resource-s3-bucket.html
    "AWS::Glue::Database": ("CatalogId",),  # aws-resource-glue-database.html
    "AWS::Glue::Table": ("CatalogId", "DatabaseName"),  # aws-resource-glue-table.html
    "AWS::MSK::Cluster": ("ClusterName",),  # aws-resource-msk-cluster.html
    "AWS::EMRServerless::Application": ("Type",),  # aws-resource-emrserverless-application.html
    "AWS::EC2::VPC": ("CidrBlock",),  # aws-resource-ec2-vpc.html
    "AWS::EC2::Subnet": ("AvailabilityZone", "CidrBlock", "VpcId"),  # aws-resource-ec2-subnet.html
    "Custom::ServerlessJobRun": (),
}
# "ServiceToken ... Update requires: Updates are not supported."
# (aws-resource-cloudformation-customresource.html)
SERVICE_TOKEN: Final = "ServiceToken"


@dataclass(frozen=True)
class Refusal:
    """One change CloudFormation refuses, or one that replaces state."""

    stack: str
    what: str
    why: str
    page: str
    logical_id: str = ""

    def line(self) -> str:
        return f"{self.stack}: {self.what}: {self.why} ({self.page})"


def exports(template: Mapping[str, Any]) -> dict[str, Any]:
    """Export name -> its value expression."""
    found: dict[str, Any] = {}
    for output in template.get("Outputs", {}).values():
        name = output.get("Export", {}).get("Name")
        if isinstance(name, str):
            found[name] = output.get("Value")
    return found


def imports(template: Mapping[str, Any]) -> set[str]:
    """The export names the template's ``Fn::ImportValue`` read."""
    return {name for name in _walk_imports(template) if isinstance(name, str)}


def _walk_imports(node: Any) -> Iterator[Any]:
    if isinstance(node, Mapping):
        if "Fn::ImportValue" in node:
            yield node["Fn::ImportValue"]
        for value in node.values():
            yield from _walk_imports(value)
    elif isinstance(node, list):
        for value in node:
            yield from _walk_imports(value)


def lost_exports(before: Templates, after: Templates) -> list[Refusal]:
    """Exports of a stack ``after`` updates that a stack of ``before`` imports
    (each of those stays deployed) and that ``after`` removes or changes."""
    imported = {name for template in before.values() for name in imports(template)}
    found: list[Refusal] = []
    for stack, template in sorted(after.items()):
        if stack not in before:
            continue
        now = exports(template)
        replaced = {
            refusal.logical_id
            for refusal in replaced_resources({stack: before[stack]}, {stack: template})
        }
        for name, value in sorted(exports(before[stack]).items()):
            if name not in imported:
                continue
            if name not in now:
                why = "removed while a deployed stack imports it"
            elif _canonical(now[name]) != _canonical(value) or _references(value) & replaced:
                why = "its value changes while a deployed stack imports it"
            else:
                continue
            found.append(Refusal(stack, f"export {name}", why, IMPORT_VALUE_PAGE))
    return found


def replaced_resources(before: Templates, after: Templates) -> list[Refusal]:
    """Stateful resources of a stack in both that ``after`` deletes, renames or
    replaces, and custom resources whose service token changes."""
    found: list[Refusal] = []
    for stack, template in sorted(after.items()):
        if stack not in before:
            continue
        old = before[stack].get("Resources", {})
        new = template.get("Resources", {})
        for logical_id, resource in sorted(old.items()):
            kind = str(resource.get("Type"))
            found += _resource_changes(stack, logical_id, kind, resource, new.get(logical_id))
    return found


def _resource_changes(
    stack: str, logical_id: str, kind: str, old: Mapping[str, Any], new: Mapping[str, Any] | None
) -> list[Refusal]:
    custom = kind.startswith("Custom::") or kind == "AWS::CloudFormation::CustomResource"
    if kind not in STATEFUL and not custom:
        return []
    page = _RESOURCE_PAGE + _page_of(kind)
    what = f"{kind} {logical_id}"
    if new is None or new.get("Type") != kind:
        if kind not in STATEFUL:
            return []
        why = "deleted (a new logical ID is a new, empty resource)"
        return [Refusal(stack, what, why, page, logical_id)]
    before_props, after_props = old.get("Properties", {}), new.get("Properties", {})
    found: list[Refusal] = []
    for prop in STATEFUL.get(kind, ()):
        if _canonical(before_props.get(prop)) != _canonical(after_props.get(prop)):
            found.append(
                Refusal(stack, f"{what}.{prop}", "changed: a replacement", page, logical_id)
            )
    if custom and _canonical(before_props.get(SERVICE_TOKEN)) != _canonical(
        after_props.get(SERVICE_TOKEN)
    ):
        found.append(
            Refusal(
                stack,
                f"{what}.{SERVICE_TOKEN}",
                "changed: updates are not supported",
                page,
                logical_id,
            )
        )
    return found


def _page_of(kind: str) -> str:
    if kind.startswith("Custom::"):
        return "aws-resource-cloudformation-customresource.html"
    _aws, service, name = kind.split("::")
    return f"aws-resource-{service.lower()}-{name.lower()}.html"


def refused_changes(before: Templates, after: Templates) -> list[Refusal]:
    """Every refusal of both rules, exports first."""
    return lost_exports(before, after) + replaced_resources(before, after)


def _references(value: Any) -> set[str]:
    """The logical IDs ``value`` reads through ``Ref`` or ``Fn::GetAtt``: a
    replaced resource changes them without changing the expression."""
    if isinstance(value, Mapping):
        if "Ref" in value:
            return {str(value["Ref"])}
        if "Fn::GetAtt" in value:
            return {str(value["Fn::GetAtt"][0])}
        return set().union(*(_references(item) for item in value.values()))
    if isinstance(value, list):
        return set().union(*(_references(item) for item in value))
    return set()


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True)
