"""The Spark conf starts a session on the pinned Spark without a deprecation warning.

Spark logs ``The configuration key 'X' has been deprecated as of Spark N`` once
per deprecated key a SparkConf receives (``SparkConf.logDeprecationWarning``).
Such a key still works until a release drops it, and then silently does
nothing: the job's own settings must use the current names. The check starts a
real session in a child process, as ``python -m job`` does, and reads its log.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from model.spark_conf import local_conf

# A key Spark 3.5 deprecated (for spark.executor.failuresValidityInterval): the
# child sets it too, so the test proves the warning is seen at all.
CANARY_KEY = "spark.yarn.executor.failuresValidityInterval"
DEPRECATED = re.compile(r"The configuration key '([^']+)' has been deprecated")

_CHILD = """
import json, sys
from job.session import build_session
conf = json.loads(sys.argv[1])
spark = build_session(conf, "deprecation-check")
spark.range(1).collect()
spark.stop()
"""


@pytest.mark.spark
def test_no_setting_of_ours_is_deprecated_at_session_start(tmp_path: Path) -> None:
    conf = local_conf(str(tmp_path))
    assert CANARY_KEY not in conf
    child = subprocess.run(
        [sys.executable, "-c", _CHILD, json.dumps({**conf, CANARY_KEY: "1h"})],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert child.returncode == 0, child.stderr[-3000:]
    warned = set(DEPRECATED.findall(child.stderr))
    assert CANARY_KEY in warned, "the deprecation warning was not seen: the check is blind"
    assert warned - {CANARY_KEY} == set(), f"deprecated keys in model/spark_conf.py: {warned}"
