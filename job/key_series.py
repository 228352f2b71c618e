"""Which undeclared keys get a CloudWatch series of their own, kept across
restarts beside the checkpoint's lease (:class:`UndeclaredKeySeries`): at most
:data:`model.contract.UNDECLARED_KEY_SERIES` named series and one for the rest,
however many keys producers invent."""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from job.cloudwatch import Datum
from model import contract
from model.storage_uri import read_object, write_object

log = logging.getLogger(__name__)


class UndeclaredKeySeries:
    """Which undeclared keys get a ``UndeclaredKeyRecords`` series of their
    own: the first ``limit`` (:data:`model.contract.UNDECLARED_KEY_SERIES`) the
    instance sees, in the order it sees them; every later key is counted
    under :data:`model.contract.OTHER_KEYS`. So at most ``limit + 1`` series
    per instance, however many keys producers invent (the table keeps every
    key, :mod:`job.undeclared`). The names survive a restart through
    ``store`` (:class:`KeySeriesFile`), written only when a name is added.
    Thread-safe: the listener bus calls it."""

    def __init__(
        self,
        named: Sequence[str] = (),
        *,
        limit: int = contract.UNDECLARED_KEY_SERIES,
        store: KeySeriesFile | None = None,
    ) -> None:
        self.limit = limit
        self._named: dict[str, None] = dict.fromkeys(
            [n for n in named if n != contract.OTHER_KEYS][:limit]
        )
        self._store = store
        self._lock = threading.Lock()

    @classmethod
    def stored(cls, checkpoint_location: str, s3_client: Any = None) -> UndeclaredKeySeries:
        store = KeySeriesFile(contract.key_series_path(checkpoint_location), s3_client)
        return cls(store.load(), store=store)

    @property
    def named(self) -> tuple[str, ...]:
        with self._lock:
            return tuple(self._named)

    def datums(self, counts: Sequence[tuple[str, int]], now: datetime) -> list[Datum]:
        """One ``UndeclaredKeyRecords`` data point per series the batch's keys
        fall in (most frequent first in ``counts``, so a batch that meets more
        new keys than free names names its most frequent ones)."""
        totals: dict[str, int] = {}
        added = False
        with self._lock:
            for key, count in counts:
                value = contract.key_dimension_value(key)
                if value not in self._named and len(self._named) < self.limit:
                    self._named[value] = None
                    added = True
                series = value if value in self._named else contract.OTHER_KEYS
                totals[series] = totals.get(series, 0) + count
            named = tuple(self._named)
        if added and self._store is not None:
            self._store.save(named)
        return [
            Datum(contract.UNDECLARED_KEY_RECORDS, float(count), "Count", now, key=key)
            for key, count in totals.items()
        ]


class KeySeriesFile:
    """The named keys as a JSON list beside the checkpoint's lease (a local
    file or an S3 object). Best effort both ways: a store that cannot be read
    starts the names afresh, one that cannot be written is logged."""

    def __init__(self, path: str, s3_client: Any = None) -> None:
        self.path = path
        self._s3 = s3_client

    def load(self) -> list[str]:
        try:
            names = json.loads(read_object(self.path, self._s3))
        except Exception as exc:  # absent (a new instance) or unreadable
            log.info("undeclared key series: none kept at %s (%s)", self.path, type(exc).__name__)
            return []
        if not isinstance(names, list):
            return []
        return [str(n) for n in names]

    def save(self, names: Sequence[str]) -> None:
        body = json.dumps(list(names)).encode("utf-8")
        try:
            write_object(self.path, body, self._s3)
        except Exception as exc:  # the names in memory still bound this run
            log.warning("could not keep the undeclared key series at %s: %s", self.path, exc)


def undeclared_key_datums(
    counts: Sequence[tuple[str, int]], now: datetime, series: UndeclaredKeySeries | None = None
) -> list[Datum]:
    """``UndeclaredKeyRecords`` of one batch: by name for the named keys, the
    rest under ``(other)`` (:class:`UndeclaredKeySeries`; a fresh one, naming
    the batch's first keys, when none is given). Keys CloudWatch cannot name
    share one name (:func:`model.contract.key_dimension_value`)."""
    return (series or UndeclaredKeySeries()).datums(counts, now)
