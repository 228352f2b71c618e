"""The figures of one benchmark result (``bench/results/<name>.json``) as rows
of figure, value, bar and verdict: the one place rows are written, for
docs/benchmarks.md (``bench.report``) and for the table ``python -m bench``
prints after a run (read back from the JSON the run saved).

Each known benchmark has a function reading the keys its JSON records; the
verdicts are the ones the JSON records (``met``), or, where a benchmark
records only its bars (``dedup``), the comparison with the bar made here. A result
of a benchmark this module does not know, or whose shape changed under a
known name, falls back to :func:`generic_rows`: every recorded figure as a key
and a value, and every recorded bar with its verdict, so a new or re-shaped
benchmark never stops the report.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, Final

from bench.framework import Row

Result = dict[str, Any]
# Keys every result has (bench.framework.write_result), shown apart from its figures.
ENVELOPE: Final = frozenset(
    {"benchmark", "measured_at", "mode", "repeats", "what", "chart", "machine", "code"}
)
# A generic table stops here: a result that records per-batch detail is long.
GENERIC_MAX_ROWS: Final = 40
GENERIC_MAX_LIST: Final = 6


def _median(summary: Result) -> float:
    return float(summary["median"])


def _x(ratio: float) -> str:
    return f"{ratio:.2f}x"


def _mib(count: float) -> str:
    return f"{count / 2**20:.1f} MiB"


def _checked(r: Result, check: Result, what: str, value: str) -> Row:
    """A row with its bar and verdict: ``check`` is the ``{"bar", "met"}`` the
    benchmark recorded for this figure."""
    return Row(r["benchmark"], what, value, check["bar"], check["met"])


def _ratio(r: Result, key: str, what: str, detail: str) -> Row:
    """A benchmark's headline: the ratio of medians it records under ``key``,
    the medians, its bar."""
    ratio = r[key]
    return _checked(r, ratio, what, f"{_x(ratio['of_medians'])} ({detail})")


def _seconds_ratio(r: Result, key: str, what: str, sides: dict[str, str], note: str = "") -> Row:
    """A headline ratio of two run times: ``sides`` maps each side's label to
    the key of its seconds summary, shown as "label median s" in that order."""
    medians = ", ".join(f"{label} {_median(r[side]):.2f} s" for label, side in sides.items())
    return _ratio(r, key, what, medians + note)


def throughput(r: Result) -> list[Row]:
    steps = ", ".join(f"{k} {v:.2f}" for k, v in r["breakdown_seconds_median"].items())
    return [
        _seconds_ratio(
            r,
            "ratio_baseline_to_subject",
            f"micro-batch vs bare Spark, {r['records']:,} records (bare s / ours s)",
            {"ours": "subject_seconds", "bare": "baseline_seconds"},
        ),
        Row(
            r["benchmark"],
            "records/s (ours / bare Spark)",
            f"{r['subject_records_per_second']:,.0f} / {r['baseline_records_per_second']:,.0f}",
        ),
        Row(r["benchmark"], "the micro-batch's steps, median s", steps),
        *_capture(r),
    ]


def _capture(r: Result) -> list[Row]:
    """The cost of keeping undeclared keys: the job with the capture against
    the same job without it, each against bare Spark (recorded from 2026-11-27)."""
    capture = r.get("undeclared_key_capture")
    if capture is None:
        return []
    ratio = _x(capture["before_ratio_of_medians"])
    value = f"{capture['change']:+.1%} (before {ratio} bare Spark)"
    return [_checked(r, capture, "undeclared-key capture: ratio after vs before", value)]


def growth(r: Result) -> list[Row]:
    fit = r["prefill"]["commit_seconds_linear_fit"]
    after = r["table_metadata"]["after_prefill"]
    return [
        _seconds_ratio(
            r,
            "ratio_b_to_a",
            f"{r['batch_records']:,}-record batch after {r['prefill']['commits']:,} commits and "
            f"{r['state_fill']['records']:,} ids vs an empty table (grown s / empty s)",
            {"grown": "b_grown_trigger_seconds", "empty": "a_empty_trigger_seconds"},
        ),
        Row(
            r["benchmark"],
            "table after the pre-fill",
            f"{after['snapshots']:,} snapshots, {after['data_files']:,} data files, "
            f"metadata.json {after['metadata_json_bytes']:,} B",
        ),
        Row(
            r["benchmark"],
            "commit time, projected at 8,640 retained snapshots",
            f"{fit['projected_commit_seconds_at_8640_snapshots']:.2f} s "
            f"({fit['seconds_per_snapshot_retained'] * 1000:.3f} ms per snapshot)",
        ),
        *_after_expiry(r),
    ]


def _after_expiry(r: Result) -> list[Row]:
    """The table once the job's expiry ran a retention later (recorded from 2026-11-26)."""
    expired = r["table_metadata"].get("after_expiry_a_retention_later")
    if expired is None:
        return []
    return [
        Row(
            r["benchmark"],
            "table after expiry a retention later",
            f"{expired['snapshots']:,} snapshots, {expired['manifest_list_entries']:,} manifests, "
            f"metadata.json {expired['metadata_json_bytes']:,} B",
        )
    ]


def overhead(r: Result) -> list[Row]:
    rows = []
    for key, label in (("empty_trigger", "empty trigger"), ("one_record_batch", "1-record batch")):
        part = r[key]
        rows.append(
            _checked(
                r, part, f"{label} p50 ({part['samples']} samples)", f"{part['p50_seconds']:.3f} s"
            )
        )
    kinesis = r.get("python_kinesis_source")
    if kinesis is not None:
        for key, label in (("empty_trigger", "empty trigger"), ("one_record_batch", "1-record")):
            part = kinesis[key]
            bar = r[key]["bar"]
            rows.append(
                _checked(
                    r,
                    {"bar": bar, "met": part["met"]},
                    f"python-kinesis source: {label} p50 ({part['samples']} samples)",
                    f"{part['p50_seconds']:.3f} s",
                )
            )
    no_data = r["no_data_batch_after_watermark_move"]
    steps = r["one_record_batch"]["breakdown_p50_seconds"]
    rows += [
        Row(
            r["benchmark"],
            f"no-data batch after the watermark moved p50 ({no_data['samples']} samples)",
            f"{no_data['p50_seconds']:.3f} s",
        ),
        Row(
            r["benchmark"],
            "1-record batch, where its time goes (p50 s)",
            ", ".join(f"{k} {v:.2f}" for k, v in steps.items()),
        ),
    ]
    return rows


def state(r: Result) -> list[Row]:
    per_key = r["bytes_per_key"]
    return [
        Row(
            r["benchmark"],
            f"de-duplication state after {r['records']:,} records "
            f"({r['keys_in_state']:,} keys, {r['horizon_hours']} h horizon)",
            f"{_mib(r['checkpoint_state_dir_bytes'])} checkpoint "
            f"(SST {_mib(r['rocksdb_sst_file_bytes'])})",
        ),
        Row(
            r["benchmark"],
            "bytes per key (checkpoint / SST / memory)",
            f"{per_key['checkpoint_state_dir']} / {per_key['rocksdb_sst_files']} / "
            f"{per_key['memory_used']}",
        ),
    ]


def kinesis_source(r: Result) -> list[Row]:
    cold = r["ratio_cold_to_baseline"]
    return [
        _ratio(
            r,
            "ratio_subject_to_baseline",
            f"running query vs a bare GetRecords loop, {r['records']:,} records on "
            f"{r['shards']} shards (records/s ratio)",
            f"ours {r['subject']['records_per_second_median']:,.0f}, "
            f"bare {r['baseline']['records_per_second_median']:,.0f} records/s",
        ),
        Row(
            r["benchmark"],
            "a new query from start() vs the bare loop",
            f"{_x(cold['of_medians'])} ({r['subject_cold']['records_per_second_median']:,.0f} "
            "records/s)",
        ),
        Row(
            r["benchmark"],
            "decode per core, no network (botocore parse + Arrow batch)",
            f"{r['driver_decode_per_core']['records_per_second']:,.0f} records/s",
        ),
    ]


def reader(r: Result) -> list[Row]:
    """The current reader's drains: 1 and 2 read tasks. A result recorded
    while the benchmark also drained the driver-side reader it replaced keeps
    that reader's figures in its JSON; its rows show the current reader's."""
    rates = r["records_per_second"]
    per_core = r["records_per_executor_python_cpu_second"]
    names = [name for name in per_core if name != "how"]
    scale = r["two_tasks_over_one"]
    server = r["server_records_per_second"]
    return [
        _checked(
            r,
            scale,
            "records/s with 2 read tasks / 1 (executor cores)",
            f"{_x(scale['value'])} ("
            + ", ".join(f"{n}: {_median(rates[n]):,.0f}" for n in names)
            + ")",
        ),
        Row(
            r["benchmark"],
            "records per executor Python CPU second (1 task, 2 tasks); cores the workers got",
            ", ".join(f"{_median(per_core[n]):,.0f}" for n in names)
            + "; "
            + ", ".join(f"{n}: {_median(r['executor_python_cores_used'][n]):.2f}" for n in names),
        ),
        Row(
            r["benchmark"],
            "driver CPU per 100k records read",
            ", ".join(
                f"{n}: {_median(r['driver_cpu_seconds_per_100k_records'][n]):.3f} s" for n in names
            ),
        ),
        Row(
            r["benchmark"],
            "loopback stand-in's rate / fastest reader's",
            f"{server['over_fastest_reader']}x ({_median(server):,.0f} records/s)",
        ),
    ]


def incident(r: Result) -> list[Row]:
    shuffles = r["shuffles"]
    split = r["baseline_breakdown_seconds_median"]
    return [
        _seconds_ratio(
            r,
            "ratio_baseline_to_subject",
            f"micro-batch vs the seed's design, {r['records']:,} records (seed s / ours s)",
            {"ours": "subject_seconds", "seed": "baseline_seconds"},
            "; its store is local SQLite, no network",
        ),
        Row(
            r["benchmark"],
            "shuffles per batch (seed / ours)",
            f"{shuffles['baseline']} / {shuffles['subject']}",
            f"ours {shuffles['subject_bar']}",
            shuffles["met"],
        ),
        Row(
            r["benchmark"],
            "the seed's store calls (SELECT + INSERT/UPDATE per key)",
            f"{r['baseline_store_calls']:,}",
        ),
        Row(
            r["benchmark"],
            "the seed's batch, where its time goes (median s)",
            ", ".join(f"{k} {v:.1f}" for k, v in split["per_handler_wall"].items())
            + f"; store calls {split['store_calls_summed_over_tasks']:.1f} "
            f"(summed over {r['shuffle_partitions']} tasks)",
        ),
    ]


def latency(r: Result) -> list[Row]:
    subject = r["subject"]
    bare = r["baseline"]["whole_run"]
    ratio = r["ratio_subject_p99_to_baseline_p99"]["median_of_windows"]
    return [
        _checked(
            r,
            subject,
            f"put -> readable p99, {r['trigger_interval_sec']} s trigger, "
            f"{r['rate_records_per_second']:,} records/s "
            f"({r['achieved_rate_records_per_second']:,.0f} achieved)",
            f"{_median(subject['p99_seconds']):.2f} s (p50 {_median(subject['p50_seconds']):.2f} s;"
            f" {_baseline_label(r)} p99 {bare['p99_seconds']:.2f} s; {ratio:.1f}x it, "
            "median of windows)",
        ),
        Row(r["benchmark"], "ids measured", f"{r['ids_measured']:,} of {r['records_put']:,} put"),
        Row(r["benchmark"], "batches (median)", _batches(r)),
    ]


def _batches(r: Result) -> str:
    """The query's batches with data: count, size, trigger time, and the
    job's own split of it where its log line was read."""
    batches = r["batches"]
    if not batches["batches"]:
        return "no batch with data ran"
    split = {k: v for k, v in r["job_split_seconds_median"].items() if k != "what"}
    parts = ", ".join(f"{k} {v:.2f} s" for k, v in split.items())
    return (
        f"{batches['batches']:,} batches, {batches['input_rows_per_batch_median']:,.0f} rows, "
        f"{_median(batches['trigger_execution_seconds']):.2f} s each"
        + (f" ({parts} in the job)" if parts else "")
    )


def _baseline_label(r: Result) -> str:
    # Results written before the EFO variant existed name no label: they are polling's.
    return str(r["baseline"].get("label", "bare GetRecords loop"))


def efo(r: Result) -> list[Row]:
    name = r["benchmark"]
    rate = f"{r['rate_records_per_sec']:,} records/s, {r['shards']} shards"
    received = sum(w["efo"]["received"] for w in r["windows"])
    put = sum(w["put"] for w in r["windows"])
    return [
        Row(
            name,
            f"put -> received p99, bare EFO loop, {rate}",
            f"{_median(r['efo_p99_sec']):.3f} s (p50 {_median(r['efo_p50_sec']):.3f} s)",
        ),
        Row(
            name,
            f"put -> received p99, bare GetRecords loop, {rate}",
            f"{_median(r['getrecords_p99_sec']):.3f} s "
            f"(p50 {_median(r['getrecords_p50_sec']):.3f} s)",
        ),
        Row(
            name,
            "records received through subscriptions",
            f"{received:,} of {put:,}; {r['subscriptions_served']:,} subscriptions, "
            f"{r['efo_batches']:,} batches",
        ),
    ]


def scale(r: Result) -> list[Row]:
    batches = sorted(r["batches"].values(), key=lambda b: int(b["records"]))
    synth = sorted(r["synth"].values(), key=lambda s: int(s["instances"]))
    memory = r["peak_memory_at_largest"]
    growth = ", ".join(f"{k}: {_x(v)}" for k, v in r["per_record_cost_growth"].items())
    size_bar, linear_bar = r["synth_bars"].values()
    fit = r["synth_fit_seconds"]
    return [
        Row(
            r["benchmark"],
            "records/s at " + " / ".join(f"{b['records']:,}" for b in batches) + " records",
            " / ".join(f"{b['records_per_second']:,.0f}" for b in batches)
            + f" (cost per record {growth})",
            f"cost per record {r['per_record_bar']}",
            r["per_record_met"],
        ),
        Row(
            r["benchmark"],
            "synth of " + " / ".join(str(s["instances"]) for s in synth) + " instances (median)",
            " / ".join(f"{_median(s['seconds']):.1f}" for s in synth) + " s",
            size_bar,
            r["synth_met"],
        ),
        Row(
            r["benchmark"],
            f"synth t({synth[-1]['instances']}) / t({synth[0]['instances']}) (medians)",
            f"{_x(r['synth_growth_ratio'])} (fit: {fit['fixed']:.1f} s + "
            f"{fit['per_instance']:.2f} s per instance)",
            linear_bar,
            r["synth_linear_met"],
        ),
        Row(
            r["benchmark"],
            f"peak memory at {memory['records']:,} records",
            f"JVM {memory['jvm_driver_and_executor_mib']:,.0f} MiB, Python workers "
            f"{memory['python_workers_total_mib']:,.0f} MiB (largest "
            f"{memory['python_worker_largest_mib']:,.0f}), driver Python "
            f"{memory['driver_python_process_mib']:,.0f} MiB",
        ),
    ]


def dedup(r: Result) -> list[Row]:
    """bench/dedup.py records its bars, not its verdicts: the comparisons its
    own table makes are made again here."""
    bars = r["bars"]
    rows = []
    for operator, f in r["flat"].items():
        gated = operator == "timers"
        rows.append(
            Row(
                r["benchmark"],
                f"{operator}: {r['batch_records']:,}-record batch at {r['fill_keys']:,} keys vs "
                "0 keys",
                f"{_x(f['ratio'])} (filled {_median(f['seconds_at_fill']):.2f} s, "
                f"empty {_median(f['seconds_at_zero']):.2f} s)" + _eviction(f),
                f"<= {bars['flat']}" if gated else "shown as it is",
                f["ratio"] <= bars["flat"] if gated else None,
            )
        )
        rows.append(
            Row(
                r["benchmark"],
                f"{operator}: state per key at {f['per_key']['keys_in_state']:,} keys",
                f"SST {f['per_key']['rocksdb_sst_file_bytes_per_key']:.0f} B, checkpoint "
                f"{f['per_key']['checkpoint_state_dir_bytes_per_key']:.0f} B",
            )
        )
    through = r["throughput"]
    count = r["throughput_batch_records"]
    ratios = [
        ("ratio_vs_builtin", "timers vs builtin (builtin s / timers s)", bars["vs_builtin"]),
        ("ratio_vs_bare", "vs bare Spark (bare s / timers s)", bars["vs_bare"]),
    ]
    if "ratio_vs_builtin_core_seconds" in through:  # recorded from 2026-11-25
        ratios.insert(
            1,
            (
                "ratio_vs_builtin_core_seconds",
                "timers vs builtin in core seconds (load-robust)",
                bars["vs_builtin"],
            ),
        )
    for key, label, bar in ratios:
        rows.append(
            Row(
                r["benchmark"],
                f"micro-batch of {count:,}: {label}",
                _x(through[key]),
                f">= {bar}",
                through[key] >= bar,
            )
        )
    return rows + _sustained(r)


def _eviction(flat: Result) -> str:
    """What eviction cost at the fill and at 0 keys, where recorded."""
    if "eviction_ms_at_fill" not in flat:
        return ""
    return (
        f"; eviction {flat['eviction_ms_at_fill']:,.0f} vs {flat['eviction_ms_at_zero']:,.0f} ms,"
        f" read {_mib(flat['bytes_read_at_fill'])} vs {_mib(flat['bytes_read_at_zero'])}"
    )


def _sustained(r: Result) -> list[Row]:
    """The rate the example cluster holds with each operator, from the
    measured costs (recorded from 2026-11-25)."""
    model = r.get("sustained")
    if model is None:
        return []
    return [
        Row(
            r["benchmark"],
            f"{operator}: sustained records/s, {model['cores']} cores, {model['horizon_h']} h, "
            f"{model['trigger_s']:.0f} s trigger",
            f"{model[operator]['records_per_s']:,} (forgetting "
            f"{model[operator]['expire_core_us_per_key']:.2f} core-us per id)",
        )
        for operator in r["flat"]
        if operator in model
    ]


def serverless_sizing(r: Result) -> list[Row]:
    name = r["benchmark"]
    phases = {"warm-up": r.get("warm_up", {}), **r["phases"], "backlog": r["backlog"]}
    rows = [
        Row(name, f"peak {what} at {phase}", ", ".join(f"{k} {v:,.0f} MiB" for k, v in mib.items()))
        for phase, figures in phases.items()
        for what, key in (("RSS", "peak_rss_mib"), ("PSS", "peak_pss_mib"))
        if (mib := figures.get(key))
    ]
    backlog = r["backlog"]
    return [
        *rows,
        Row(
            name,
            "per-batch fixed cost (median batch at 10/s)",
            f"{r['per_batch_fixed_cost_ms']:,.0f} ms",
        ),
        Row(
            name,
            "sustained records/s, one executor core",
            f"{r['sustained_records_per_sec_one_core']:,.0f} ({backlog['records']:,}-record "
            f"backlog drained in {backlog['drain_sec']:.1f} s)",
        ),
        Row(
            name,
            f"highest rate holding the {r['trigger_interval_sec']:.0f} s trigger",
            f"{r['highest_rate_holding_trigger_records_per_sec']:,.0f} records/s",
        ),
        Row(name, "start to first rows", f"{r['startup_to_first_rows_sec']:.1f} s"),
    ]


def stop(r: Result) -> list[Row]:
    name = r["benchmark"]
    return [
        Row(
            name,
            f"stop marker to exit p50 ({r['stops']} stops at {r['rate_records_per_sec']:,} "
            f"records/s, {r['trigger_sec']:g} s trigger)",
            f"{r['p50_sec']:.2f} s",
        ),
        Row(
            name,
            "stop marker to exit, max",
            f"{r['max_sec']:.2f} s ({r['max_over_bound']:.2f} of the bound)",
            f"<= trigger + slowest batch = {r['bound_sec']:.2f} s",
            r["met"],
        ),
        Row(
            name,
            f"slowest batch of the run ({r['batches']:,} batches with data)",
            f"{r['slowest_batch_sec']:.2f} s",
        ),
    ]


KNOWN: Final[dict[str, Callable[[Result], list[Row]]]] = {
    "throughput": throughput,
    "dedup": dedup,
    "growth": growth,
    "state": state,
    "overhead": overhead,
    "kinesis_source": kinesis_source,
    "reader": reader,
    "incident": incident,
    "latency": latency,
    "latency_efo": latency,
    "efo": efo,
    "scale": scale,
    "serverless_sizing": serverless_sizing,
    "stop": stop,
}


def _shown(value: Any) -> str | None:
    """A recorded value as a table cell; None for what a key/value table
    cannot show (long lists, lists of objects)."""
    if isinstance(value, bool | int | float | str) or value is None:
        return str(value).replace("\n", " ").replace("|", "\\|")
    if isinstance(value, list) and len(value) <= GENERIC_MAX_LIST:
        cells = [_shown(item) for item in value if not isinstance(item, dict | list)]
        if len(cells) == len(value):
            return ", ".join(str(cell) for cell in cells)
    return None


def _leaves(value: Any, path: str) -> Iterator[tuple[str, Any]]:
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _leaves(item, f"{path}.{key}" if path else str(key))
    else:
        yield path, value


def _verdicts(value: Any, path: str) -> Iterator[tuple[str, dict[str, Any]]]:
    if isinstance(value, dict):
        if "bar" in value and isinstance(value.get("met"), bool):
            yield path, value
        for key, item in value.items():
            yield from _verdicts(item, f"{path}.{key}" if path else str(key))


def _numbers(found: dict[str, Any]) -> str:
    """The numbers recorded beside a bar (the figure it judges)."""
    return ", ".join(
        f"{key} {value}"
        for key, value in found.items()
        if isinstance(value, int | float) and not isinstance(value, bool)
    )


def generic_rows(r: Result) -> list[Row]:
    """Every recorded bar with its verdict, then the recorded figures as keys
    and values (up to ``GENERIC_MAX_ROWS``; the JSON holds the rest)."""
    name = str(r.get("benchmark", "?"))
    figures = {k: v for k, v in r.items() if k not in ENVELOPE}
    rows = [
        Row(name, path, _numbers(found), str(found["bar"]), found["met"])
        for path, found in _verdicts(figures, "")
    ]
    shown = [(path, _shown(value)) for path, value in _leaves(figures, "")]
    kept = [(path, cell) for path, cell in shown if cell is not None and len(cell) <= 200]
    rows += [Row(name, path, cell) for path, cell in kept[:GENERIC_MAX_ROWS]]
    if len(kept) > GENERIC_MAX_ROWS or len(kept) < len(shown):
        rows.append(Row(name, "(more)", "further figures are in the JSON"))
    return rows


def rows_for(r: Result) -> tuple[list[Row], str | None]:
    """The rows of a result, and why it fell back to the generic table (None
    when its benchmark's own function read it)."""
    reader = KNOWN.get(str(r.get("benchmark")))
    if reader is None:
        return generic_rows(r), "no reader for this benchmark in bench/report_rows.py"
    try:
        return reader(r), None
    except (KeyError, TypeError, ValueError, IndexError, AttributeError) as exc:
        why = f"its JSON is not the shape bench/report_rows.py reads ({type(exc).__name__}: {exc})"
        return generic_rows(r), why
