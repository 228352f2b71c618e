"""Creation order: what CloudFormation creates before the EMR
cluster and before the job's step.

CloudFormation orders resources only through ``Ref``, ``Fn::GetAtt`` (and the
references inside ``Fn::Sub``) and ``DependsOn``
(https://docs.aws.amazon.com/AWSCloudFormation/latest/UserGuide/aws-attribute-dependson.html),
so each synthesized template is read as a graph of those edges and its
transitive closure is checked:

* the cluster waits for every IAM policy attached to its instance role and to
  its service role: its nodes boot with the instance profile and run the
  bootstrap actions at once;
* one of the instance role's policies holds everything booting needs (the
  bootstrap scripts and the job's files, the log prefix, the local-disk key,
  the TLS zip) and waits for no MSK resource, which can take tens of minutes;
* the step waits for the job role's policies, the events table, the failure
  topic and, when the instance has them, its Lake Formation grants.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest

from tests.infra.conftest import Synthesized

# (fixture, stack): the shipped example and the instance on an existing VPC
# and MSK cluster (tests/infra/conftest.py), and one with Lake Formation grants.
STACKS = [
    ("synthesized", "Streaming-orders-ap-northeast-2"),
    ("synthesized", "Streaming-payments-ap-northeast-2"),
    ("synthesized", "Streaming-orders-eu-west-1"),
    ("synthesized_existing", "Streaming-refunds-eu-west-1"),
    ("synthesized_lake_formation", "Streaming-orders-eu-west-1"),
]
POLICY_TYPES = ("AWS::IAM::Policy", "AWS::IAM::ManagedPolicy")
# ``${Name}`` or ``${Name.Attribute}`` in an Fn::Sub string; ``${!Literal}`` is escaped.
SUB_REFERENCE = re.compile(r"\$\{(?!!)([^}]+)\}")
# Resource attributes CloudFormation does not order by.
NOT_ORDERING = frozenset({"Type", "Metadata", "DependsOn", "DeletionPolicy", "UpdateReplacePolicy"})

Resources = dict[str, dict[str, Any]]
Graph = dict[str, set[str]]


# ------------------------------------------------------------ the graph


def references(value: Any) -> set[str]:
    """Every name ``value`` refers to: ``Ref``, ``Fn::GetAtt`` (list and
    ``"Name.Attribute"`` forms) and the ``${Name}``/``${Name.Attribute}`` of an
    ``Fn::Sub`` string (less the names its own variable map defines)."""
    if isinstance(value, list):
        return set().union(*(references(item) for item in value))
    if not isinstance(value, dict):
        return set()
    if len(value) == 1:
        ((function, argument),) = value.items()
        if function == "Ref" and isinstance(argument, str):
            return {argument}
        if function == "Fn::GetAtt":
            if isinstance(argument, str):
                return {argument.split(".", 1)[0]}
            return {argument[0]} | references(argument[1:])
        if function == "Fn::Sub":
            text, variables = (argument, {}) if isinstance(argument, str) else argument
            named = {name.split(".", 1)[0] for name in SUB_REFERENCE.findall(text)}
            return (named - set(variables)) | references(variables)
    return set().union(*(references(item) for item in value.values()))


def dependency_graph(resources: Resources) -> Graph:
    """Each resource's direct dependencies among the template's resources."""
    graph: Graph = {}
    for logical_id, resource in resources.items():
        found = references({k: v for k, v in resource.items() if k not in NOT_ORDERING})
        depends_on = resource.get("DependsOn", [])
        found |= {depends_on} if isinstance(depends_on, str) else set(depends_on)
        graph[logical_id] = {name for name in found if name in resources}
    return graph


def closure(graph: Graph, start: str) -> set[str]:
    """Everything ``start`` waits for, directly or not (``start`` excluded)."""
    seen: set[str] = set()
    pending = list(graph[start])
    while pending:
        current = pending.pop()
        if current not in seen:
            seen.add(current)
            pending.extend(graph[current])
    return seen


# ------------------------------------------------------------ reading templates


def of_type(resources: Resources, *types: str) -> set[str]:
    return {logical_id for logical_id, r in resources.items() if r["Type"] in types}


def only(found: set[str], what: str) -> str:
    assert len(found) == 1, f"expected one {what}, got {sorted(found)}"
    return next(iter(found))


def roles_of_cluster(resources: Resources) -> tuple[str, str, str]:
    """(cluster, instance role, service role) logical IDs."""
    cluster_id = only(of_type(resources, "AWS::EMR::Cluster"), "EMR cluster")
    cluster = resources[cluster_id]["Properties"]
    profile = only(references(cluster["JobFlowRole"]), "instance profile")
    assert resources[profile]["Type"] == "AWS::IAM::InstanceProfile"
    instance_role = only(references(resources[profile]["Properties"]["Roles"]), "instance role")
    service_role = only(references(cluster["ServiceRole"]), "service role")
    for role in (instance_role, service_role):
        assert resources[role]["Type"] == "AWS::IAM::Role"
    return cluster_id, instance_role, service_role


def attached_policies(resources: Resources, role: str) -> set[str]:
    """The policy resources attached to ``role``: by their ``Roles``, or by the
    role's ``ManagedPolicyArns``."""
    by_policy = {
        logical_id
        for logical_id in of_type(resources, *POLICY_TYPES)
        if role in references(resources[logical_id]["Properties"].get("Roles", []))
    }
    by_role = references(resources[role]["Properties"].get("ManagedPolicyArns", []))
    return by_policy | (by_role & of_type(resources, *POLICY_TYPES))


def render(value: Any, resources: Resources) -> str:
    """A string-valued property with its intrinsics as ``${Name}`` tokens; an S3
    bucket's ``Arn`` attribute is spelled as the ARN of its ``Ref`` (its name),
    so that ARNs and ``s3://`` URIs compare."""
    if isinstance(value, str):
        return value
    assert isinstance(value, dict) and len(value) == 1, value
    ((function, argument),) = value.items()
    if function == "Ref":
        return f"${{{argument}}}"
    if function == "Fn::GetAtt":
        name, attribute = argument.split(".", 1) if isinstance(argument, str) else argument
        if attribute == "Arn" and resources.get(name, {}).get("Type") == "AWS::S3::Bucket":
            return f"arn:${{AWS::Partition}}:s3:::${{{name}}}"
        return f"${{{name}.{attribute}}}"
    if function == "Fn::Join":
        separator, parts = argument
        return str(separator).join(render(part, resources) for part in parts)
    if function == "Fn::Sub" and isinstance(argument, str):
        return argument
    raise AssertionError(f"unsupported intrinsic: {value!r}")


def s3_arn(uri: str) -> str:
    assert uri.startswith("s3://"), uri
    return f"arn:${{AWS::Partition}}:s3:::{uri.removeprefix('s3://')}"


def wildcard(pattern: str, text: str) -> bool:
    """IAM matching: ``*`` any run of characters, ``?`` one; actions ignore case."""
    regex = "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern)
    return re.fullmatch(regex, text, flags=re.IGNORECASE) is not None


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


# A condition that holds for the objects booting needs: they are all in the
# stack's own account (the TLS zip's bucket must be, docs/infra.md).
OWN_ACCOUNT = {"StringEquals": {"s3:ResourceAccount": {"Ref": "AWS::AccountId"}}}


def allows(document: dict[str, Any], action: str, arn: str, resources: Resources) -> bool:
    """An Allow statement of ``document``, unconditional or limited to the
    stack's account, covers ``action`` on ``arn``."""
    return any(
        statement["Effect"] == "Allow"
        and statement.get("Condition", OWN_ACCOUNT) == OWN_ACCOUNT
        and any(wildcard(a, action) for a in _as_list(statement["Action"]))
        and any(wildcard(render(r, resources), arn) for r in _as_list(statement["Resource"]))
        for statement in document["Statement"]
    )


def s3_uris(value: Any, resources: Resources) -> Iterator[str]:
    for item in _as_list(value):
        text = render(item, resources)
        if text.startswith("s3://"):
            yield text


def boot_needs(resources: Resources, cluster_id: str) -> list[tuple[str, str]]:
    """(action, ARN) pairs a node needs while it boots and starts the job:
    every object the bootstrap actions name, the job's files the step names in
    the same bucket, a log object under the cluster's log URI, the local-disk
    key and the TLS certificate zip of its security configuration."""
    cluster = resources[cluster_id]["Properties"]
    needs: list[tuple[str, str]] = []
    bootstrap_buckets = set()
    for action in cluster["BootstrapActions"]:
        script = action["ScriptBootstrapAction"]
        for uri in [*s3_uris(script["Path"], resources), *s3_uris(script["Args"], resources)]:
            needs.append(("s3:GetObject", s3_arn(uri)))
            bootstrap_buckets.add(uri.removeprefix("s3://").split("/", 1)[0])
    assert len(needs) >= 4 and len(bootstrap_buckets) == 1, needs
    (step_id,) = of_type(resources, "AWS::EMR::Step")
    step_args = resources[step_id]["Properties"]["HadoopJarStep"]["Args"]
    job_files = [
        uri
        for uri in s3_uris(step_args, resources)
        if uri.removeprefix("s3://").split("/", 1)[0] in bootstrap_buckets
    ]
    assert len(job_files) >= 3, job_files  # app.zip, main.py, job-config.json
    needs += [("s3:GetObject", s3_arn(uri)) for uri in job_files]
    log_uri = render(cluster["LogUri"], resources)
    needs.append(("s3:PutObject", s3_arn(f"{log_uri}j-EXAMPLE/node/i-0abc/bootstrap.gz")))
    security = only(references(cluster["SecurityConfiguration"]), "security configuration")
    encryption = resources[security]["Properties"]["SecurityConfiguration"][
        "EncryptionConfiguration"
    ]
    key = render(
        encryption["AtRestEncryptionConfiguration"]["LocalDiskEncryptionConfiguration"][
            "AwsKmsKey"
        ],
        resources,
    )
    needs += [("kms:Decrypt", key), ("kms:GenerateDataKey", key)]
    tls = encryption["InTransitEncryptionConfiguration"]["TLSCertificateConfiguration"]
    needs.append(("s3:GetObject", s3_arn(render(tls["S3Object"], resources))))
    return needs


# ------------------------------------------------------------ the tests


@pytest.fixture(params=STACKS, ids=[f"{f}:{n}" for f, n in STACKS])
def template(request: pytest.FixtureRequest) -> Resources:
    fixture, name = request.param
    synthesized: Synthesized = request.getfixturevalue(fixture)
    resources: Resources = synthesized.templates[name]["Resources"]
    return resources


@pytest.fixture
def graph(template: Resources) -> Graph:
    return dependency_graph(template)


@pytest.mark.synth
def test_cluster_waits_for_every_policy_of_its_roles(template: Resources, graph: Graph) -> None:
    cluster, instance_role, service_role = roles_of_cluster(template)
    waits_for = closure(graph, cluster)
    missing = {}
    for role in (instance_role, service_role):
        policies = attached_policies(template, role)
        assert policies, role
        missing[role] = sorted(policies - waits_for)
    assert missing == {instance_role: [], service_role: []}, f"{cluster} does not wait for them"


@pytest.mark.synth
def test_a_policy_of_the_instance_role_holds_what_booting_needs_without_waiting_for_msk(
    template: Resources, graph: Graph
) -> None:
    cluster, instance_role, _ = roles_of_cluster(template)
    msk = {lid for lid, r in template.items() if r["Type"].startswith("AWS::MSK::")}
    assert msk, "no MSK resource: the check below would prove nothing"
    needs = boot_needs(template, cluster)
    verdicts = {}
    for policy in sorted(attached_policies(template, instance_role)):
        document = template[policy]["Properties"]["PolicyDocument"]
        waits_for_msk = sorted(closure(graph, policy) & msk)
        lacking = [need for need in needs if not allows(document, *need, template)]
        verdicts[policy] = (waits_for_msk, lacking)
        if not waits_for_msk and not lacking:
            return
    raise AssertionError(
        f"no boot policy; per policy (MSK waited for, boot needs lacking): {verdicts}"
    )


@pytest.mark.synth
def test_step_waits_for_the_job_policies_table_topic_and_lake_formation_grants(
    template: Resources, graph: Graph
) -> None:
    _, instance_role, _ = roles_of_cluster(template)
    step = only(of_type(template, "AWS::EMR::Step"), "EMR step")
    needed = {
        *attached_policies(template, instance_role),
        *of_type(template, "AWS::Glue::Table"),
        *of_type(template, "AWS::MSK::Topic"),
        *{lid for lid, r in template.items() if r["Type"].startswith("AWS::LakeFormation::")},
    }
    assert of_type(template, "AWS::Glue::Table") and of_type(template, "AWS::MSK::Topic")
    missing = sorted(needed - closure(graph, step))
    assert missing == [], f"{step} does not wait for {missing}"


# ------------------------------------------------------------ the walker itself


def test_references_reads_every_intrinsic_form() -> None:
    value = {
        "A": {"Ref": "Plain"},
        "B": {"Fn::GetAtt": ["Listed", "Arn"]},
        "C": {"Fn::GetAtt": "Dotted.Arn"},
        "D": {"Fn::Sub": "arn:${AWS::Partition}:x:::${Subbed}/${SubAttr.Name}/${!Escaped}"},
        "E": {"Fn::Sub": ["${Local}-${Outer}", {"Local": {"Ref": "InMap"}}]},
        "F": [{"Fn::Join": ["", [{"Ref": "Joined"}, "x"]]}],
    }
    assert references(value) == {
        "Plain",
        "Listed",
        "Dotted",
        "AWS::Partition",
        "Subbed",
        "SubAttr",
        "Outer",
        "InMap",
        "Joined",
    }


def test_closure_follows_depends_on_and_references() -> None:
    resources: Resources = {
        "A": {"Type": "T", "DependsOn": "B"},
        "B": {"Type": "T", "Properties": {"X": {"Fn::Sub": "${C.Arn}"}}},
        "C": {"Type": "T", "DependsOn": ["D"], "Metadata": {"M": {"Ref": "E"}}},
        "D": {"Type": "T"},
        "E": {"Type": "T"},
    }
    graph = dependency_graph(resources)
    assert closure(graph, "A") == {"B", "C", "D"}
    assert closure(graph, "E") == set()
