"""Lease (local flock and S3 conditional puts).

Python logic only: S3 is moto in-process (``mock_aws``, the same backend and
the same conditional-put checks as the moto server), so no emulator process
and no JVM (unit tier).
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from model.lease import (
    FileLease,
    LeaseHeldError,
    LeaseKeeper,
    LeaseLostError,
    S3Lease,
    file_lease_state,
    lease_path,
    make_lease,
    s3_lease_state,
)
from tests.fake_clock import FakeClock
from tests.job.lease_fakes import ScriptedLease, keeper_that_lost


def test_lease_sits_beside_the_checkpoint() -> None:
    assert lease_path("s3://b/checkpoints/x/") == "s3://b/checkpoints/x/_lease"
    assert isinstance(make_lease("/tmp/cp", "i", 30), FileLease)
    assert isinstance(make_lease("s3://b/cp", "i", 30, s3_client=object()), S3Lease)


def test_file_lease_refuses_a_second_holder_then_frees_on_release(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "cp" / "_lease"
    first = FileLease(path, "inst", "first")
    first.acquire(wait_sec=0)
    second = FileLease(path, "inst", "second", poll_sec=0.05)
    with (
        caplog.at_level(logging.WARNING, logger="model.lease"),
        pytest.raises(LeaseHeldError, match=r"held by first.*refusing to start"),
    ):
        second.acquire(wait_sec=0.3)
    waits = [r.getMessage() for r in caplog.records if "waiting at most" in r.getMessage()]
    assert len(waits) == 1, "said once at once, then every 10 s"
    assert f"lease {path} is held by first" in waits[0]
    first.release()
    second.acquire(wait_sec=0)
    second.release()


def test_file_lease_is_free_the_moment_its_holder_is_killed(tmp_path: Path) -> None:
    path = tmp_path / "_lease"
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            textwrap.dedent(
                f"""
                import sys, time
                from pathlib import Path
                from model.lease import FileLease
                FileLease(Path({str(path)!r}), "inst", "child").acquire(0)
                print("held", flush=True)
                time.sleep(120)
                """
            ),
        ],
        stdout=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
    )
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline().strip() == b"held"
        with pytest.raises(LeaseHeldError):
            FileLease(path, "inst", "me").acquire(wait_sec=0.2)
        holder.send_signal(signal.SIGKILL)
        holder.wait(timeout=10)
        lease = FileLease(path, "inst", "me")
        lease.acquire(wait_sec=0)  # the kernel dropped the flock with the process: no wait
        lease.release()
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait(timeout=10)


def test_s3_lease_conditional_puts(s3: Any, bucket: str) -> None:
    clock = FakeClock(now=1_000_000.0)
    first = S3Lease(s3, bucket, "cp/_lease", "inst", "first", ttl_sec=30, clock=clock)
    first.acquire(wait_sec=0)
    second = S3Lease(
        s3, bucket, "cp/_lease", "inst", "second", ttl_sec=30, clock=clock, poll_sec=0.05
    )
    with pytest.raises(LeaseHeldError, match="held by first"):
        second.acquire(wait_sec=0.2)

    clock.now += 10
    first.renew()  # pushes the expiry to now + 30
    clock.now += 25
    with pytest.raises(LeaseHeldError):
        second.acquire(wait_sec=0.1)

    clock.now += 10  # first stopped renewing (SIGKILL): its lease expired
    second.acquire(wait_sec=0)
    with pytest.raises(LeaseLostError, match="expired before it could be renewed"):
        first.renew()
    second.release()
    assert "Contents" not in s3.list_objects_v2(Bucket=bucket, Prefix="cp/")


def test_s3_lease_taken_over_is_reported_lost_by_the_old_holder(s3: Any, bucket: str) -> None:
    clock = FakeClock(now=1_000_000.0)
    old = S3Lease(s3, bucket, "k", "inst", "old", ttl_sec=30, clock=clock)
    old.acquire(wait_sec=0)
    clock.now += 31
    S3Lease(s3, bucket, "k", "inst", "new", ttl_sec=30, clock=clock).acquire(wait_sec=0)
    clock.now -= 30  # old thinks it is still in time: the etag check catches it
    with pytest.raises(LeaseLostError, match="taken"):
        old.renew()


def test_lease_keeper_reports_loss(s3: Any, bucket: str) -> None:
    # A frozen clock: the lease cannot expire however late the keeper's thread
    # runs (renewals every 0.2 s of real time), so the one possible loss is the
    # overwrite below.
    lease = S3Lease(
        s3, bucket, "keeper", "inst", "me", ttl_sec=0.6, clock=FakeClock(now=1_000_000.0)
    )
    lease.acquire(wait_sec=0)
    s3.put_object(Bucket=bucket, Key="keeper", Body=b"{}")  # someone else overwrote it
    keeper = LeaseKeeper(lease)
    keeper.start()
    try:
        assert keeper.lost.wait(timeout=10)
        assert keeper.reason == f"lease s3://{bucket}/keeper was taken by another copy"
    finally:
        keeper.stop()


def test_lease_keeper_retries_transient_errors_until_the_lease_is_lost(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # A network error twice, then the lease has expired.
    unreachable = ConnectionError("endpoint unreachable")
    expired = LeaseLostError("lease s3://b/k expired before it could be renewed")
    lease = ScriptedLease([unreachable, unreachable, expired])
    keeper = keeper_that_lost(lease)
    assert lease.renewals == 3
    assert keeper.reason == "lease s3://b/k expired before it could be renewed"
    retried = [r.getMessage() for r in caplog.records if "will retry" in r.getMessage()]
    assert (
        retried == ["lease renewal failed, will retry: ConnectionError: endpoint unreachable"] * 2
    )


def test_the_lease_names_the_version_its_holder_runs(s3: Any, bucket: str) -> None:
    """The supervisor compares it with the stack's step after a rollback."""
    clock = FakeClock(now=1_000_000.0)
    lease = make_lease(f"s3://{bucket}/cp", "inst", 30, s3_client=s3, version="abc123")
    assert isinstance(lease, S3Lease)
    lease.clock = clock
    lease.acquire(wait_sec=0)
    body = s3.get_object(Bucket=bucket, Key="cp/_lease")["Body"].read()
    state = s3_lease_state("s3://b/cp/_lease", body, clock.now)
    assert state.running and state.version == "abc123"
    clock.now += 10
    lease.renew()  # a renewal keeps it
    body = s3.get_object(Bucket=bucket, Key="cp/_lease")["Body"].read()
    assert s3_lease_state("s3://b/cp/_lease", body, clock.now).version == "abc123"
    lease.release()


def test_a_lease_without_a_version_reads_as_unknown() -> None:
    """A lease written before the field existed, or a malformed one: unknown,
    never a version to hand over from."""
    old = b'{"owner": "node:1", "instance": "inst", "expires_at": 2000}'
    state = s3_lease_state("s3://b/cp/_lease", old, 1000)
    assert state.running and state.holder == "node:1" and state.version is None
    for odd in (b'{"expires_at": 2000, "version": 7}', b'{"expires_at": 2000, "version": ""}'):
        assert s3_lease_state("s3://b/cp/_lease", odd, 1000).version is None


def test_a_local_lease_names_the_version_too(tmp_path: Path) -> None:
    lease = make_lease(str(tmp_path / "cp"), "inst", 30, version="abc123")
    lease.acquire(wait_sec=0)
    try:
        assert file_lease_state(tmp_path / "cp" / "_lease").version == "abc123"
    finally:
        lease.release()
    unversioned = make_lease(str(tmp_path / "cp"), "inst", 30)
    unversioned.acquire(wait_sec=0)
    try:
        assert file_lease_state(tmp_path / "cp" / "_lease").version is None
    finally:
        unversioned.release()
