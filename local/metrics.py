"""What the job published to CloudWatch (moto), read back for the summary.

moto stores every datapoint and answers ``GetMetricData`` with one value per
period; with a 1-second period each batch's duration is one value (batches
are seconds apart), which is what the p50/p99 need.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Final

from app import aws_clients, contract

READER_LIMITS: Final = aws_clients.ClientLimits(
    connect_timeout_sec=5, read_timeout_sec=30, retries=3
)


@dataclass(frozen=True)
class PublishedMetrics:
    datapoints_by_metric: dict[str, int] = field(default_factory=dict)
    batch_durations_ms: tuple[float, ...] = ()

    @property
    def datapoints(self) -> int:
        return sum(self.datapoints_by_metric.values())


def cloudwatch_client(region: str, endpoint_url: str) -> Any:
    """A client for the emulator (fake credentials, bounded timeouts)."""
    from local.emulators import FAKE_CREDENTIALS
    from local.producer import client_credentials

    return aws_clients.client(
        "cloudwatch",
        READER_LIMITS,
        region=region,
        endpoint_url=endpoint_url,
        credentials=client_credentials(FAKE_CREDENTIALS),
    )


def _query(metric: str, stat: str, instance: str, index: int) -> dict[str, Any]:
    return {
        "Id": f"m{index}",
        "MetricStat": {
            "Metric": {
                "Namespace": contract.METRIC_NAMESPACE,
                "MetricName": metric,
                "Dimensions": contract.dimensions(instance),
            },
            "Period": 1,
            "Stat": stat,
        },
    }


def read_published(client: Any, instance: str, start: datetime, end: datetime) -> PublishedMetrics:
    """Datapoints per metric and batch durations in [start, end)."""
    start = start - timedelta(seconds=2)
    end = end + timedelta(seconds=2)
    counts: dict[str, int] = {}
    queries = [_query(m, "SampleCount", instance, i) for i, m in enumerate(contract.ALL_METRICS)]
    queries.append(_query(contract.BATCH_DURATION_MS, "Maximum", instance, len(queries)))
    response = client.get_metric_data(MetricDataQueries=queries, StartTime=start, EndTime=end)
    by_id = {r["Id"]: [float(v) for v in r["Values"]] for r in response["MetricDataResults"]}
    for i, metric in enumerate(contract.ALL_METRICS):
        counts[metric] = int(sum(by_id.get(f"m{i}", [])))
    durations = tuple(by_id.get(f"m{len(contract.ALL_METRICS)}", []))
    return PublishedMetrics(counts, durations)
