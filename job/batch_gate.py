"""The gate in front of every micro-batch: what lets a graceful stop end right
after the batch in flight, under any load.

Spark offers no "stop after this batch": ``query.stop()`` interrupts the
stream thread wherever it is, and interrupting a running batch can leave it
half done on the JVM side (a ``StackOverflowError`` in the stream thread was
seen on 4.1.1, docs/design.md). Waiting for a moment when no batch runs does
not work under steady load either: when batches take about a trigger
interval, the next one starts as the last one ends, and such a moment never
comes.

So the job closes this gate when a stop is asked for. The batch in flight (if
any) runs on and commits as usual; the next batch, the moment Spark hands it
to ``foreachBatch``, raises :class:`BatchRefusedError` before it reads a record,
sends a failure or writes a file. Spark then ends the query on that error
without writing the batch's commit: its offsets (already in the offsets log)
are replayed, unchanged, by the next start, exactly as after a crash between
two batches (docs/job.md, "Lifecycle"). Nothing of it is half committed,
because nothing of it ran. :func:`refusal` tells that ending from a real
failure.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any, Final

# In the refusal's message, which Spark carries into the query's exception
# (the Python traceback of the foreachBatch function).
REFUSED: Final = "graceful stop: batch refused before it started"


class BatchRefusedError(RuntimeError):
    """Raised by a batch that starts after the gate closed: it did nothing."""


class BatchGate:
    """Wraps the ``foreachBatch`` function; :meth:`close` refuses every batch
    that has not started yet, and so does ``asked`` (checked as each batch
    starts) returning True: a stop asked for while a batch runs is seen as
    the next one starts. Thread-safe: Spark calls the function on its stream
    thread (through Py4J), the job's main loop closes the gate."""

    def __init__(
        self,
        asked: Callable[[], bool] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._asked = asked
        self._clock = clock
        self._lock = threading.Lock()
        self._closed = False
        self._running = False
        self._since = clock()  # when the gate last changed state: a batch ended, or it closed
        self.refused: int | None = None  # the batch id refused, once one was

    def wrap(self, process: Callable[[Any, int], None]) -> Callable[[Any, int], None]:
        def gated(batch: Any, batch_id: int) -> None:
            if self._asked is not None and self._asked():
                self.close()
            with self._lock:
                if self._closed:
                    self.refused = batch_id
                    raise BatchRefusedError(f"{REFUSED}: batch {batch_id} runs at the next start")
                self._running = True
            try:
                process(batch, batch_id)
            finally:
                with self._lock:
                    self._running = False
                    self._since = self._clock()

        return gated

    def close(self) -> None:
        with self._lock:
            self._closed = True
            if not self._running:
                self._since = self._clock()

    @property
    def running(self) -> bool:
        """A batch is inside the function now (the batch in flight)."""
        with self._lock:
            return self._running

    def idle_for(self) -> float:
        """Seconds since the gate last saw a batch end, or closed with none
        running (0 while a batch runs): how long the stream has been quiet."""
        with self._lock:
            return 0.0 if self._running else self._clock() - self._since


def refusal(failure: BaseException | None, gate: BatchGate) -> bool:
    """The query ended on the gate's refusal (a graceful stop), not on a failure."""
    return failure is not None and gate.refused is not None and REFUSED in str(failure)
