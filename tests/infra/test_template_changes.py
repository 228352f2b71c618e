"""The three rules of infra/template_changes.py on small templates: each
refusal it must find, and the harmless changes it must let through."""

from __future__ import annotations

from typing import Any

from infra.template_changes import (
    IMPORT_VALUE_PAGE,
    exports,
    imports,
    lost_exports,
    refused_changes,
    replaced_resources,
)

VPC_EXPORT = "Shared:ExportsOutputRefVpc"


def shared(*names: str, vpc: str = "Vpc") -> dict[str, Any]:
    outputs = {
        name.replace(":", ""): {"Value": {"Ref": vpc}, "Export": {"Name": name}} for name in names
    }
    vpc_resource = {"Type": "AWS::EC2::VPC", "Properties": {"CidrBlock": "10.0.0.0/16"}}
    return {"Resources": {vpc: vpc_resource}, "Outputs": outputs}


def instance(*imported: str, bucket: str = "Data", token: str = "Fn") -> dict[str, Any]:
    return {
        "Resources": {
            bucket: {"Type": "AWS::S3::Bucket", "Properties": {}},
            "Group": {
                "Type": "AWS::EC2::SecurityGroup",
                "Properties": {"VpcId": [{"Fn::ImportValue": name} for name in imported]},
            },
            "JobRun": {
                "Type": "Custom::ServerlessJobRun",
                "Properties": {"ServiceToken": {"Fn::GetAtt": [token, "Arn"]}, "A": "1"},
            },
        }
    }


def test_exports_and_imports_are_read_from_outputs_and_anywhere_in_the_template() -> None:
    assert exports(shared(VPC_EXPORT)) == {VPC_EXPORT: {"Ref": "Vpc"}}
    assert imports(instance(VPC_EXPORT, "Other")) == {VPC_EXPORT, "Other"}


def test_an_export_a_deployed_stack_imports_cannot_go() -> None:
    before = {"Shared": shared(VPC_EXPORT), "A": instance(VPC_EXPORT)}
    (refusal,) = lost_exports(before, {"Shared": shared()})
    assert (refusal.stack, refusal.what, refusal.page) == (
        "Shared",
        f"export {VPC_EXPORT}",
        IMPORT_VALUE_PAGE,
    )
    assert "removed while a deployed stack imports it" in refusal.line()


def test_an_imported_export_cannot_change_its_value() -> None:
    before = {"Shared": shared(VPC_EXPORT), "A": instance(VPC_EXPORT)}
    (refusal,) = lost_exports(before, {"Shared": shared(VPC_EXPORT, vpc="Vpc2")})
    assert refusal.why == "its value changes while a deployed stack imports it"


def test_an_export_nobody_imports_may_go_and_a_stack_left_out_is_not_updated() -> None:
    before = {"Shared": shared(VPC_EXPORT, "Shared:Unused"), "A": instance(VPC_EXPORT)}
    assert lost_exports(before, {"Shared": shared(VPC_EXPORT)}) == []
    assert lost_exports(before, {"A": instance(VPC_EXPORT)}) == []


def test_a_renamed_stateful_resource_is_a_replacement() -> None:
    before = {"A": instance(bucket="Data")}
    (refusal,) = replaced_resources(before, {"A": instance(bucket="DataRenamed")})
    assert refusal.what == "AWS::S3::Bucket Data"
    assert refusal.page.endswith("aws-resource-s3-bucket.html")


def test_a_replacement_property_of_a_stateful_resource_is_refused() -> None:
    before = {"Shared": shared(VPC_EXPORT)}
    changed = shared(VPC_EXPORT)
    changed["Resources"]["Vpc"]["Properties"]["CidrBlock"] = "10.1.0.0/16"
    (refusal,) = replaced_resources(before, {"Shared": changed})
    assert refusal.what == "AWS::EC2::VPC Vpc.CidrBlock"


def test_a_custom_resource_keeps_its_service_token_and_may_change_the_rest() -> None:
    before = {"A": instance()}
    (refusal,) = replaced_resources(before, {"A": instance(token="Fn2")})
    assert refusal.what == "Custom::ServerlessJobRun JobRun.ServiceToken"
    assert refusal.page.endswith("aws-resource-cloudformation-customresource.html")
    other = instance()
    other["Resources"]["JobRun"]["Properties"]["A"] = "2"
    assert replaced_resources(before, {"A": other}) == []


def test_a_stateless_resource_may_go_and_a_new_stack_is_no_change() -> None:
    before = {"A": instance()}
    fewer = instance()
    del fewer["Resources"]["Group"]
    assert refused_changes(before, {"A": fewer, "B": instance()}) == []


def test_an_imported_export_of_a_replaced_resource_changes_its_value() -> None:
    """Same expression, new resource: the exported id is a new one."""
    before = {"Shared": shared(VPC_EXPORT), "A": instance(VPC_EXPORT)}
    changed = shared(VPC_EXPORT)
    changed["Resources"]["Vpc"]["Properties"]["CidrBlock"] = "10.1.0.0/16"
    (refusal,) = lost_exports(before, {"Shared": changed})
    assert refusal.why == "its value changes while a deployed stack imports it"
