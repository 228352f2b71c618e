"""One KMS key per stack for its CloudWatch log groups (and, on an
instance's stack, its alarm topic: infra/constructs/alarm_topic.py).

Why a customer key: the logs name hosts, ports and clients of the instance; a
key of the instance's own lets its owner revoke or audit every read. Why one
per stack, not one per log group: a key is billed $1 a month whatever it
encrypts (https://aws.amazon.com/kms/pricing/), and a light instance had six;
the boundary that matters is the instance (its neighbours never share its
key), and each service may still use the key only for what it names.

CloudWatch Logs encrypts with the key itself, so the key policy must let the
regional CloudWatch Logs principal use it, limited by the encryption context
to the stack's own log groups:
https://docs.aws.amazon.com/AmazonCloudWatch/latest/logs/encrypt-log-data-kms.html
(the ``kms:EncryptionContext:aws:logs:arn`` condition, ``ArnEquals`` the log
groups' ARNs, a list: any one of them). Each group is given a name
(``/<construct path>/<id>``), so its ARN is known without a reference to the
group, which would be a cycle (the group needs the key).

Changing a log group's key leaves what it already holds under the old key
("The log events that were ingested while the key was associated with the log
group are still encrypted with that key",
https://docs.aws.amazon.com/AmazonCloudWatchLogs/latest/APIReference/API_DisassociateKmsKey.html):
a stack updated from one key per group keeps the old keys if its removal
policy retains them, and their owner schedules their deletion once the
groups' retention has passed (docs/deploy.md).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

import jsii
from aws_cdk import Aws, IStableListProducer, IStableStringProducer, Lazy, RemovalPolicy, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_logs as logs
from constructs import Construct

# infra/config.py's LOG_RETENTION_DAYS as CDK names them (tests/infra/test_config.py
# checks the two list the same days).
RETENTION: Final = {
    7: logs.RetentionDays.ONE_WEEK,
    14: logs.RetentionDays.TWO_WEEKS,
    30: logs.RetentionDays.ONE_MONTH,
    60: logs.RetentionDays.TWO_MONTHS,
    90: logs.RetentionDays.THREE_MONTHS,
    180: logs.RetentionDays.SIX_MONTHS,
    365: logs.RetentionDays.ONE_YEAR,
}


def retention_days(days: int) -> logs.RetentionDays:
    """A validated ``retention.*_log_days`` (infra/config.py) as CDK's enum."""
    return RETENTION[days]


def log_group_name(scope: Construct, construct_id: str) -> str:
    """``/<stack>/<construct path>/<construct_id>``: unique per stack (stacks
    are named per instance) and known at synth time."""
    return f"/{scope.node.path}/{construct_id}"


def log_group_arn(name: str) -> str:
    """The ARN CloudWatch Logs puts in the encryption context (no ``:*``)."""
    return f"arn:{Aws.PARTITION}:logs:{Aws.REGION}:{Aws.ACCOUNT_ID}:log-group:{name}"


@jsii.implements(IStableStringProducer)
class _Text:
    """A value read when the template is rendered, after every user has
    added itself: CDK's ``Lazy`` takes an object with ``produce``."""

    def __init__(self, produce: Callable[[], str]) -> None:
        self._produce = produce

    def produce(self) -> str:
        return self._produce()


@jsii.implements(IStableListProducer)
class _List:
    """:class:`_Text`'s list twin (jsii types each producer by its interface)."""

    def __init__(self, produce: Callable[[], list[str]]) -> None:
        self._produce = produce

    def produce(self) -> list[str]:
        return self._produce()


class StackKey(Construct):
    """The stack's one key: ``key``. Log groups are added with
    :meth:`for_log_group`; other users add their own statements to ``key``
    and name themselves with :meth:`describe`."""

    ID: Final = "LogsKey"

    def __init__(self, stack: Stack, removal_policy: RemovalPolicy) -> None:
        super().__init__(stack, self.ID)
        self.removal_policy = removal_policy
        self._groups: list[str] = []
        self._logs_of: list[str] = []
        self._uses: list[str] = []
        self.key = kms.Key(
            self,
            "Key",
            description=Lazy.string(_Text(lambda: self._description(stack.stack_name))),
            enable_key_rotation=True,
            removal_policy=removal_policy,
        )
        self.key.add_to_resource_policy(
            iam.PolicyStatement(
                sid="CloudWatchLogsUse",
                principals=[iam.ServicePrincipal(f"logs.{Aws.REGION}.amazonaws.com")],
                actions=[
                    "kms:Encrypt*",
                    "kms:Decrypt*",
                    "kms:ReEncrypt*",
                    "kms:GenerateDataKey*",
                    "kms:Describe*",
                ],
                resources=["*"],
                conditions={
                    "ArnEquals": {
                        "kms:EncryptionContext:aws:logs:arn": Lazy.list(
                            _List(lambda: list(self._groups))
                        )
                    }
                },
            )
        )

    def for_log_group(self, name: str, *, what: str) -> kms.Key:
        """The key, which CloudWatch Logs may now use for the group ``name`` too."""
        self._groups.append(log_group_arn(name))
        self._logs_of.append(what)
        return self.key

    def describe(self, use: str) -> None:
        self._uses.append(use)

    def _description(self, stack_name: str) -> str:
        logs = "the CloudWatch logs of " + "; ".join(self._logs_of) if self._logs_of else ""
        return f"Encrypts, for {stack_name}: " + "; and ".join(filter(None, [logs, *self._uses]))


def stack_key(scope: Construct, removal_policy: RemovalPolicy) -> StackKey:
    """The key of ``scope``'s stack, made on first use. Every user must ask
    with the same removal policy: the key outlives or dies with all of them."""
    stack = Stack.of(scope)
    found = stack.node.try_find_child(StackKey.ID)
    if found is None:
        return StackKey(stack, removal_policy)
    if not isinstance(found, StackKey):
        raise TypeError(f"{stack.node.path}/{StackKey.ID}: not a StackKey")
    if found.removal_policy != removal_policy:
        raise ValueError(
            f"{stack.node.path}: the stack key's removal policy is {found.removal_policy}, "
            f"asked for {removal_policy}; allowed: one removal policy for a stack's keys"
        )
    return found


def encrypted_log_group(
    scope: Construct,
    construct_id: str,
    *,
    what: str,
    retention: logs.RetentionDays,
    removal_policy: RemovalPolicy,
) -> logs.LogGroup:
    """A log group under the stack's key (:func:`stack_key`), named after its
    place in the app (:func:`log_group_name`)."""
    name = log_group_name(scope, construct_id)
    key = stack_key(scope, removal_policy).for_log_group(name, what=what)
    return logs.LogGroup(
        scope,
        construct_id,
        log_group_name=name,
        retention=retention,
        encryption_key=key,
        removal_policy=removal_policy,
    )
