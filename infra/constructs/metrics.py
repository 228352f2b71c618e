"""The metrics an instance's alarms watch and its dashboard shows: the job's
own (names, namespace and dimension from ``model.contract``, the module the job
publishes with) and the stream's GetRecords iterator age."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from aws_cdk import Duration
from aws_cdk import aws_cloudwatch as cw

from model import contract

# The stream's own metric, beside the job's (model.contract names those).
ITERATOR_AGE: Final = "GetRecords.IteratorAgeMilliseconds"


@dataclass(frozen=True)
class InstanceMetrics:
    """``metric(name, statistic)`` is one of the job's metrics of this instance
    at the alarm period; ``iterator_age`` the stream's (maximum)."""

    namespace: str
    instance_id: str
    period: Duration
    iterator_age: cw.IMetric

    def metric(self, name: str, statistic: str, label: str | None = None) -> cw.IMetric:
        """``name`` is an ``model.contract`` metric or :data:`ITERATOR_AGE`."""
        if name == ITERATOR_AGE:
            return self.iterator_age
        found = cw.Metric(
            namespace=self.namespace,
            metric_name=name,
            dimensions_map={contract.INSTANCE_DIMENSION: self.instance_id},
            statistic=statistic,
            period=self.period,
        )
        return found if label is None else found.with_(label=label)

    def undeclared_keys(self) -> cw.IMetric:
        """Events per undeclared key, one line per ``Key`` value the job
        published (the keys are the producers' choice, unknown at synth): a
        search expression over the instance's ``UndeclaredKeyRecords``
        (https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/search-expression-syntax.html;
        dashboards only, no alarm can use one)."""
        schema = f"{{{self.namespace},{contract.INSTANCE_DIMENSION},{contract.KEY_DIMENSION}}}"
        query = (
            f'{schema} MetricName="{contract.UNDECLARED_KEY_RECORDS}" '
            f'{contract.INSTANCE_DIMENSION}="{self.instance_id}"'
        )
        return cw.SearchExpression(
            expression=f"SEARCH('{query}', 'Sum', {int(self.period.to_seconds())})",
            label="",
            period=self.period,
        )

    def by_reason(self, reason: str) -> cw.IMetric:
        """Failure records of one reason of the job's taxonomy (the ``Reason`` dimension)."""
        return cw.Metric(
            namespace=self.namespace,
            metric_name=contract.FAILURE_RECORDS_BY_REASON,
            dimensions_map={
                contract.INSTANCE_DIMENSION: self.instance_id,
                contract.REASON_DIMENSION: reason,
            },
            statistic="Sum",
            period=self.period,
            label=reason,
        )
