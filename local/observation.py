"""A progress snapshot of one local instance: what its job has made so far of
what was produced (:meth:`local.harness.LocalInstance.observe`)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Observation:
    """A progress snapshot: what the job has made so far of what was produced."""

    seconds: float
    batches: int
    rows: int
    failures: int
    expected_rows: int
    expected_failures: int
    job_running: bool
    # make produce --work-dir runs into this run still under way (producer.local_run).
    outside_pending: int = 0

    @property
    def accounted(self) -> bool:
        return (
            self.rows >= self.expected_rows
            and self.failures >= self.expected_failures
            and self.outside_pending == 0
        )

    @property
    def lag(self) -> int:
        return max(0, self.expected_rows - self.rows) + max(
            0, self.expected_failures - self.failures
        )

    def line(self, name: str) -> str:
        state = "running" if self.job_running else "stopped"
        return (
            f"[{name}] {self.seconds:5.0f}s  {state:7}  batches {self.batches:4d}  "
            f"rows {self.rows:,}/{self.expected_rows:,}  "
            f"failures {self.failures:,}/{self.expected_failures:,}  lag {self.lag:,}"
            + (f"  make produce under way: {self.outside_pending}" if self.outside_pending else "")
        )
