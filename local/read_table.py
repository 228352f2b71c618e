"""``python -m local.read_table``: dump a table of a local run as JSON rows.

Opens the run's embedded metastore with the same Spark conf the job used
(:func:`app.spark_conf.local_conf` on the same work directory), so it must run
after the job has stopped: embedded Derby admits one JVM at a time.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m local.read_table")
    parser.add_argument("--work-dir", required=True, type=Path)
    parser.add_argument("--table", required=True, help="database.table")
    parser.add_argument("--columns", required=True, help="comma-separated columns")
    parser.add_argument("--out", required=True, type=Path)
    args = parser.parse_args(argv)

    from app.session import build_session
    from app.spark_conf import local_conf

    conf = local_conf(str(args.work_dir))
    conf["spark.sql.shuffle.partitions"] = "2"
    spark = build_session(conf, "read-table")
    try:
        spark.sparkContext.setLogLevel("ERROR")
        columns = [c for c in args.columns.split(",") if c]
        frame = spark.table(args.table).select(*columns)
        rows = [
            {k: (v.isoformat() if hasattr(v, "isoformat") else v) for k, v in r.asDict().items()}
            for r in frame.collect()
        ]
    finally:
        spark.stop()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(rows), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
