"""What a Spark Python worker needs so that a task's fixed cost stays small.

Before every task, Spark's Python worker calls ``importlib.invalidate_caches()``
(``pyspark.worker_util.setup_spark_files``; still unconditional in 4.1.1). On
Python 3.10 to 3.12 that makes every ``zipimporter`` on the worker's import
path re-read its archive's whole directory: ``pyspark.zip``, the py4j zip,
``app.zip`` on EMR, and even the
spark-core jar, which Spark puts on the workers' ``PYTHONPATH`` (one importer
per imported sub-package, each reading the archive again). Measured here: 0.1
to 0.2 s per task before any of its rows are read, the largest part of a
1-record micro-batch's pass (``make bench`` overhead).

CPython made the invalidation lazy in 3.13
(https://github.com/python/cpython/issues/103200) and Spark invalidates only
when the path changed only after 4.1 (SPARK-54744,
https://github.com/apache/spark/pull/53518). Until both reach the cluster's
interpreter and Spark, :func:`keep_archive_directories` makes a worker skip the
re-read. It is safe in a worker because the archives on its path are fixed for
the application's life: Spark ships ``--py-files`` and its own archives once,
and an archive added later arrives under a new path, which gets a new importer
that reads its directory on first use.
"""

from __future__ import annotations

import sys
import zipimport
from typing import Final

# The first CPython whose zipimporter.invalidate_caches only drops the cache.
LAZY_SINCE: Final = (3, 13)


def _keep(self: zipimport.zipimporter) -> None:
    """An archive's directory, read once, stays valid for the worker's life."""


def keep_archive_directories() -> bool:
    """Make ``importlib.invalidate_caches()`` leave zip archives' directories be,
    in this process (a Python worker); True when it changed anything."""
    if sys.version_info >= LAZY_SINCE or zipimport.zipimporter.invalidate_caches is _keep:
        return False
    zipimport.zipimporter.invalidate_caches = _keep  # type: ignore[method-assign]
    return True
