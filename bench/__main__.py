"""``make bench``: benchmarks reported as ratios to a baseline measured in the same run.

Absolute records/s on a shared 2-core machine against moto say little; the
ratio of the Spark source to a bare GetRecords loop over the same stream, in
the same minute, is what a change to the source moves. Results go to
``bench/results/<name>.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench")
    parser.add_argument("--records", type=int, default=20_000)
    parser.add_argument("--shards", type=int, default=4)
    parser.add_argument("--out", type=Path, default=RESULTS / "kinesis_source.json")
    args = parser.parse_args(argv)

    from bench.kinesis_source import REGION, fill_stream, raw_loop, spark_source
    from local.emulators import FAKE_CREDENTIALS, running_emulators
    from local.producer import kinesis_client

    os.environ.update(FAKE_CREDENTIALS)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    with running_emulators() as emulators:
        endpoint = emulators.endpoints.aws_url
        client = kinesis_client(REGION, endpoint)
        fill_stream(client, args.records, args.shards)
        baseline_runs = [raw_loop(client) for _ in range(3)]
        baseline = max(baseline_runs, key=lambda m: m.records_per_second)
        subject = spark_source(endpoint, args.records)
    if baseline.records != args.records or subject.records != args.records:
        print(f"error: read {baseline.records} / {subject.records} of {args.records}")
        return 1
    result: dict[str, Any] = {
        "benchmark": "python-kinesis source vs raw boto3 GetRecords loop (moto)",
        "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "records": args.records,
        "shards": args.shards,
        "baseline": {
            "what": "boto3 GetRecords loop, one thread per shard, best of 3",
            "seconds": round(baseline.seconds, 3),
            "records_per_second": round(baseline.records_per_second, 1),
        },
        "subject": {
            "what": "Spark streaming query, python-kinesis -> noop sink, from start()",
            "seconds": round(subject.seconds, 3),
            "records_per_second": round(subject.records_per_second, 1),
        },
        "ratio_subject_to_baseline": round(
            subject.records_per_second / baseline.records_per_second, 3
        ),
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
