"""The end-of-run verdict: what was produced against what the job made of it.

Pure: the caller gathers the produced records, the table's ids, the failure
topic and the batch figures; this module compares them. The promise it checks
is the product's: every produced event is either one row in the table or one
failure record on the topic (after de-duplication by key), and no id is in the
table twice. A re-sent event (same id) counts once.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field


def percentile(values: Sequence[float], pct: float) -> float | None:
    """Nearest-rank percentile (the value below which ``pct`` % of values fall)."""
    if not 0 < pct <= 100:
        raise ValueError(f"pct={pct}: must be in (0, 100]")
    if not values:
        return None
    ordered = sorted(values)
    # pct * n first: pct / 100 * n rounds 7 / 100 * 100 up to rank 8.
    rank = max(1, math.ceil(pct * len(ordered) / 100))
    return float(ordered[rank - 1])


@dataclass(frozen=True)
class RunFigures:
    """Everything measured for one instance; the inputs of :func:`summarize`."""

    instance: str
    produced_records: int
    produced_by_kind: Mapping[str, int]
    expected_ids: frozenset[str]
    expected_failures: Mapping[str, str]
    table_ids: Sequence[str]
    topic_reasons_by_key: Mapping[str, Sequence[str]]
    topic_records: int
    batch_durations_ms: Sequence[float] = ()
    table_snapshots: int = 0
    table_data_files: int = 0
    batches: int = 0
    metrics_published: int = 0
    seconds: float = 0.0
    # PutRecords entries, and how many of them were KPL aggregates (each
    # holding several of the produced records): the records themselves are
    # counted as events, whatever carried them.
    produced_kinesis_records: int = 0
    produced_aggregates: int = 0
    # Of produced_records, those ``make produce --work-dir`` put in from
    # outside while the run ran (producer.local_run.produced_dir): accepted.
    outside_records: int = 0
    # How the job read the stream (:func:`source_line`).
    source: str = ""
    # Enhanced fan-out: subscriptions the local SubscribeToShard endpoint
    # served (None: the instance polls, or the figure could not be read).
    fan_out_subscriptions: int | None = None


def source_line(
    reader: str, consumer_type: str, consumer_name: str | None, served: int | None
) -> str:
    """The summary's reader line: which reader, polling or enhanced fan-out
    through which consumer, and (fan-out) how many subscriptions the local
    SubscribeToShard endpoint served (None: unknown)."""
    if consumer_type != "SubscribeToShard":
        return f"{reader}, polling (GetRecords)"
    count = (
        "subscriptions served: unknown" if served is None else f"{served:,} subscriptions served"
    )
    return f"{reader}, enhanced fan-out (SubscribeToShard via consumer {consumer_name}; {count})"


@dataclass(frozen=True)
class Summary:
    """One instance's verdict (:func:`summarize`): the figures it was made of,
    what the comparison found, and ``problems``, one line per broken promise."""

    figures: RunFigures
    resent_records: int
    unique_events: int
    rows: int
    duplicate_ids: int
    failure_records: int
    failures_by_reason: dict[str, int]
    missing_ids: tuple[str, ...]
    unexpected_ids: tuple[str, ...]
    missing_failures: tuple[str, ...]
    unexpected_failures: tuple[str, ...]
    wrong_reasons: dict[str, tuple[str, str]]
    p50_batch_ms: float | None
    p99_batch_ms: float | None
    problems: tuple[str, ...] = field(default=())

    @property
    def ok(self) -> bool:
        return not self.problems

    def to_json(self) -> str:
        """The verdict and every figure behind it (``summary.json`` in the
        run's work dir); the expected ids, a set, are written sorted."""
        return json.dumps(dataclasses.asdict(self), indent=1, default=sorted)

    def lines(self) -> list[str]:
        def ms(value: float | None) -> str:
            return "n/a" if value is None else f"{value:,.0f} ms"

        fig = self.figures
        in_aggregates = fig.produced_records - (
            fig.produced_kinesis_records - fig.produced_aggregates
        )
        reasons = ", ".join(f"{k}={v}" for k, v in self.failures_by_reason.items()) or "none"
        out = [
            f"instance {fig.instance}",
            *([f"  Kinesis source        {fig.source}"] if fig.source else []),
            f"  records produced      {fig.produced_records:>8,}  "
            f"({self.resent_records:,} re-sent ids, {self.unique_events:,} unique events)",
            *(
                [
                    f"  of which from outside {fig.outside_records:>8,}  "
                    "(make produce --work-dir while the run ran)"
                ]
                if fig.outside_records
                else []
            ),
            f"  Kinesis records       {fig.produced_kinesis_records:>8,}  "
            f"({fig.produced_aggregates:,} KPL aggregates holding "
            f"{in_aggregates:,} of the records)",
            f"  rows in the table     {self.rows:>8,}  "
            f"(read through the catalog: {fig.table_snapshots:,} snapshots, "
            f"{fig.table_data_files:,} data files)",
            f"  failure records       {self.failure_records:>8,}  "
            f"(distinct keys; {fig.topic_records:,} on the topic) by reason: {reasons}",
            f"  duplicate ids         {self.duplicate_ids:>8,}",
            f"  missing               {len(self.missing_ids) + len(self.missing_failures):>8,}",
            f"  batches               {fig.batches:>8,}  "
            f"p50 {ms(self.p50_batch_ms)}, p99 {ms(self.p99_batch_ms)}",
            f"  metrics published     {fig.metrics_published:>8,}",
            f"  check                 "
            f"{self.unique_events:,} = {self.rows:,} + {self.failure_records:,} -> "
            f"{'OK' if self.ok else 'FAILED'}",
        ]
        out.extend(f"  PROBLEM: {p}" for p in self.problems)
        return out


def _sample(items: Iterable[str], limit: int = 5) -> str:
    listed = sorted(items)
    more = f" (+{len(listed) - limit} more)" if len(listed) > limit else ""
    return ", ".join(listed[:limit]) + more


def summarize(figures: RunFigures) -> Summary:
    table_counts = Counter(figures.table_ids)
    table_set = set(table_counts)
    duplicate_ids = sum(n - 1 for n in table_counts.values())
    topic_keys = set(figures.topic_reasons_by_key)
    expected_keys = set(figures.expected_failures)
    resent = figures.produced_by_kind.get("duplicate", 0)
    unique_events = figures.produced_records - resent

    missing_ids = tuple(sorted(figures.expected_ids - table_set))
    unexpected_ids = tuple(sorted(table_set - figures.expected_ids))
    missing_failures = tuple(sorted(expected_keys - topic_keys))
    unexpected_failures = tuple(sorted(topic_keys - expected_keys))
    wrong: dict[str, tuple[str, str]] = {}
    for key in sorted(expected_keys & topic_keys):
        seen = set(figures.topic_reasons_by_key[key])
        want = figures.expected_failures[key]
        if seen != {want}:
            wrong[key] = (want, "|".join(sorted(seen)))
    by_reason = Counter(
        "|".join(sorted(set(reasons))) for reasons in figures.topic_reasons_by_key.values()
    )

    problems: list[str] = []
    rows = len(figures.table_ids)
    failures = len(topic_keys)
    if unique_events != rows + failures:
        problems.append(
            f"unique events {unique_events} != rows {rows} + failure records {failures}"
        )
    if duplicate_ids:
        dups = [k for k, n in table_counts.items() if n > 1]
        problems.append(f"{duplicate_ids} duplicate ids in the table: {_sample(dups)}")
    if missing_ids:
        problems.append(f"{len(missing_ids)} valid ids missing: {_sample(missing_ids)}")
    if unexpected_ids:
        problems.append(f"{len(unexpected_ids)} unexpected ids: {_sample(unexpected_ids)}")
    if missing_failures:
        problems.append(
            f"{len(missing_failures)} failure records missing: {_sample(missing_failures)}"
        )
    if unexpected_failures:
        problems.append(
            f"{len(unexpected_failures)} unexpected failure records: {_sample(unexpected_failures)}"
        )
    if wrong:
        problems.append(
            f"{len(wrong)} failure records with the wrong reason: "
            + _sample(f"{k} want {w} got {g}" for k, (w, g) in wrong.items())
        )
    if figures.fan_out_subscriptions == 0 and rows:
        problems.append(
            "enhanced fan-out instance, but the SubscribeToShard endpoint served no "
            "subscription: its rows did not come through enhanced fan-out"
        )

    durations = list(figures.batch_durations_ms)
    return Summary(
        figures,
        resent_records=resent,
        unique_events=unique_events,
        rows=rows,
        duplicate_ids=duplicate_ids,
        failure_records=failures,
        failures_by_reason=dict(sorted(by_reason.items())),
        missing_ids=missing_ids,
        unexpected_ids=unexpected_ids,
        missing_failures=missing_failures,
        unexpected_failures=unexpected_failures,
        wrong_reasons=wrong,
        p50_batch_ms=percentile(durations, 50),
        p99_batch_ms=percentile(durations, 99),
        problems=tuple(problems),
    )
