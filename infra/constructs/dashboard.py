"""The CloudWatch dashboard of one instance: what the run report
(``local/report.py``) shows, for a deployed instance.

The time range's totals, batch duration against the trigger interval with the
batch count, end-to-end latency, lag, input vs processed rate, failure records
against records in, and failure records by reason (one
``FailureRecordsByReason`` series per reason of the job's taxonomy, each with
the ``Reason`` dimension). Each graph of a watched metric draws its alarm's
threshold, taken from the alarm specs (infra/constructs/alarms.py), so the
line and the alarm cannot drift.

Statistics (https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/Statistics-definitions.html):
``SampleCount`` of a per-batch metric is the number of batches in the
period, ``Sum`` of ``InputRows`` the records in, ``Maximum`` of
``BatchDurationMs`` the slowest batch. A single-value widget with
``setPeriodToTimeRange`` shows one value for the whole time range
(https://docs.aws.amazon.com/AmazonCloudWatch/latest/APIReference/CloudWatch-Dashboard-Body-Structure.html).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from aws_cdk import aws_cloudwatch as cw
from constructs import Construct

from infra.constructs.metrics import ITERATOR_AGE, InstanceMetrics
from model import contract
from model.record import REASONS

if TYPE_CHECKING:
    from infra.constructs.alarms import AlarmSpec


@dataclass(frozen=True)
class DashboardProps:
    """``name`` is the dashboard's (the stack name); ``specs`` the alarms whose
    thresholds the graphs draw, ``alarms`` the alarms the status widget shows."""

    name: str
    trigger_interval_sec: int
    metrics: InstanceMetrics
    specs: tuple[AlarmSpec, ...]
    alarms: tuple[cw.Alarm, ...]


class Dashboard(Construct):
    """Exposes ``dashboard``. The CloudWatch dashboard is this construct's
    ``Default`` child, so its logical ID is ``<scope>Dashboard…``, as it was
    when the alarms construct made it itself."""

    def __init__(self, scope: Construct, construct_id: str, *, props: DashboardProps) -> None:
        super().__init__(scope, construct_id)
        metrics = props.metrics

        def labelled(name: str, statistic: str, label: str) -> cw.IMetric:
            return metrics.metric(name, statistic, label)

        def alarm_line(*watched: str, label: str = "") -> list[cw.HorizontalAnnotation]:
            """The threshold of the alarms on ``watched`` metrics, named after them."""
            specs = [spec for spec in props.specs if spec.metric in watched]
            names = " / ".join(spec.name for spec in specs)
            text = f"{label} ({names} alarm)" if label else f"{names} alarm"
            return [cw.HorizontalAnnotation(value=specs[0].threshold, label=text)]

        batches = labelled(contract.BATCH_DURATION_MS, "SampleCount", "batches")
        records_in = labelled(contract.INPUT_ROWS, "Sum", "records in")
        self.dashboard = cw.Dashboard(self, "Default", dashboard_name=props.name)
        self.dashboard.add_widgets(
            cw.AlarmStatusWidget(alarms=list(props.alarms), title="Alarms", width=24)
        )
        self.dashboard.add_widgets(
            cw.SingleValueWidget(
                title="This time range",
                metrics=[
                    batches,
                    records_in,
                    labelled(contract.FAILURE_RECORDS, "Sum", "failure records"),
                    labelled(contract.BATCH_DURATION_MS, "Maximum", "slowest batch (ms)"),
                    labelled(contract.END_TO_END_LATENCY_MS, "Maximum", "max latency (ms)"),
                ],
                set_period_to_time_range=True,
                width=24,
            )
        )

        def graph(
            title: str,
            left: list[cw.IMetric],
            right: list[cw.IMetric] | None = None,
            line: list[cw.HorizontalAnnotation] | None = None,
            stacked: bool | None = None,
        ) -> cw.GraphWidget:
            return cw.GraphWidget(
                width=12,
                title=title,
                left=left,
                right=right,
                left_annotations=line,
                stacked=stacked,
            )

        trigger = f"trigger interval {props.trigger_interval_sec} s"
        graphs = [
            graph(
                "Batch duration (ms) vs trigger interval",
                [
                    labelled(contract.BATCH_DURATION_MS, "Average", "average batch"),
                    labelled(contract.BATCH_DURATION_MS, "Maximum", "slowest batch"),
                ],
                right=[batches],
                line=alarm_line(contract.BATCH_DURATION_MS, label=trigger),
            ),
            graph(
                "End-to-end latency (ms)",
                [metrics.metric(contract.END_TO_END_LATENCY_MS, "Maximum")],
                line=alarm_line(contract.END_TO_END_LATENCY_MS),
            ),
            graph(
                "Scheduling-delay ratio",
                [metrics.metric(contract.SCHEDULING_DELAY_RATIO, "Average")],
                line=alarm_line(contract.SCHEDULING_DELAY_RATIO),
            ),
            graph(
                "Consumer lag (ms)",
                [metrics.iterator_age, metrics.metric(contract.SOURCE_LAG_MS, "Maximum")],
                line=alarm_line(ITERATOR_AGE, contract.SOURCE_LAG_MS),
            ),
            graph(
                "Input vs processed rate (rows/s)",
                [
                    labelled(contract.INPUT_ROWS_PER_SECOND, "Average", "input rows/s"),
                    labelled(contract.PROCESSED_ROWS_PER_SECOND, "Average", "processed rows/s"),
                ],
            ),
            graph(
                "Failure records vs records in",
                [labelled(contract.FAILURE_RECORDS, "Sum", "failure records")],
                right=[records_in],
                line=alarm_line(contract.FAILURE_RECORDS),
            ),
            graph(
                "Failure records by reason",
                [metrics.by_reason(reason) for reason in REASONS],
                stacked=True,
            ),
            graph("Heartbeat", [metrics.metric(contract.HEARTBEAT, "SampleCount")]),
            # The supervisor (infra/supervisor/): restarts in its rolling hour,
            # and 1 while it has given up.
            graph(
                "Supervisor: restarts in the hour",
                [labelled(contract.SUPERVISOR_RESTARTS, "Maximum", "restarts")],
                right=[labelled(contract.SUPERVISOR_GAVE_UP, "Maximum", "gave up (1)")],
                line=alarm_line(contract.SUPERVISOR_GAVE_UP),
            ),
            # Keys events carry beyond job.event_fields (kept in undeclared_fields).
            graph(
                "Events with undeclared keys, by key",
                [metrics.undeclared_keys()],
                right=[records_in],
            ),
        ]
        for widget in graphs:
            self.dashboard.add_widgets(widget)
