"""The supervisor against the real job process (the harness plays EMR,
local/supervisor/emr.py): a SIGKILLed job comes back, and again after the
back-off when killed soon after, with nothing lost or doubled, and an
operator's stop is left alone; a batch that always fails (Kafka down) gets
exactly the budget's restarts and then one alarm naming the reason, and once
the broker is back a restart delivers everything; a refused
configuration gets no restart and an alarm at once.

The policy is the Lambda's rules with a short window and back-off (a check a
second), so a case takes a minute or two, not an hour.
"""

from __future__ import annotations

import io
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from infra.supervisor.decision import GAVE_UP_BUDGET, SupervisorState
from local.emulators import Emulators
from local.harness import LocalInstance
from local.supervisor.emr import LocalSupervisor
from model import contract
from model.exit_record import read_exit_record
from producer.events import SampleRecord
from scripts import stop
from scripts.status import __main__ as status
from tests.e2e.conftest import MakeLocal, mix, poll
from tests.infra.supervisor.policy_helpers import local_pace_policy

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]

INSTANCE = "orders-ap-northeast-2"
# A check a second; a restart must hold the lease within start_grace_sec.
POLICY = local_pace_policy(max_restarts=2, window_sec=600, backoff_max_sec=2)
# Detection bound locally: the kernel drops a dead holder's flock at once, so
# one check interval plus the check itself.
RESTART_BOUND_SEC = 10


@pytest.fixture
def supervised() -> Iterator[list[LocalSupervisor]]:
    made: list[LocalSupervisor] = []
    yield made
    for supervisor in made:
        supervisor.stop()


def supervise(local: LocalInstance, made: list[LocalSupervisor]) -> LocalSupervisor:
    supervisor = LocalSupervisor(local, POLICY, interval_sec=1.0)
    supervisor.start()
    made.append(supervisor)
    return supervisor


def seen_running(supervisor: LocalSupervisor) -> bool:
    return supervisor.state.last_seen_running is not None


def running_supervised(
    local: LocalInstance, made: list[LocalSupervisor], records: list[SampleRecord]
) -> LocalSupervisor:
    """The job started under a supervisor, ``records`` landed, and the
    supervisor has seen the job hold its lease: where every case begins."""
    local.start_job()
    supervisor = supervise(local, made)
    local.produce(records)
    local.wait_until_accounted(timeout=300)
    poll(lambda: seen_running(supervisor), "the supervisor saw the job run", 30)
    return supervisor


def test_a_killed_job_is_restarted_again_after_the_back_off_and_an_operator_stop_is_not(
    emulators: Emulators,
    make_local: MakeLocal,
    supervised: list[LocalSupervisor],
    tmp_path: Path,
) -> None:
    """Killed, restarted, seen holding its lease, killed again well inside
    start_grace_sec (240 s): the second restart comes within
    the back-off plus a check, not after the grace; nothing is lost or
    doubled; then ``make stop-job`` stops it and it stays stopped."""
    local = make_local(emulators, INSTANCE)
    supervisor = running_supervised(local, supervised, mix(800, seed=81, prefix="sv-a"))

    killed = local.job
    assert killed is not None
    local.kill_job()
    poll(lambda: len(supervisor.restarts) == 1, "a restart after the kill", RESTART_BOUND_SEC)
    restart = supervisor.restarts[0]
    assert restart.reason == contract.EXIT_VANISHED, restart.message
    assert local.job is not killed and local.job is not None and local.job.running
    first = restart.state.restarts[-1]

    def took_its_lease() -> bool:
        seen = supervisor.state.last_seen_running
        return seen is not None and seen > first

    poll(took_its_lease, "the restarted job held its lease", 180, interval=0.5)
    killed_at = time.time()
    assert killed_at - first < POLICY.start_grace_sec
    local.kill_job()
    bound = POLICY.backoff(1) + RESTART_BOUND_SEC
    poll(lambda: len(supervisor.restarts) == 2, "the second restart", bound, interval=0.2)
    second = supervisor.restarts[1]
    assert second.reason == contract.EXIT_VANISHED, second.message
    waited = second.state.restarts[-1] - killed_at
    print(f"\nsecond kill {killed_at - first:.0f}s after restart 1; restarted {waited:.1f}s later")
    assert waited < bound

    local.produce(mix(800, seed=82, prefix="sv-b"))
    local.wait_until_accounted(timeout=300)
    summary = local.summary()
    assert summary.duplicate_ids == 0
    assert summary.missing_ids == ()
    assert summary.ok, summary.problems

    # make stop-job: the job stops gracefully and stays stopped.
    target = ["--instance", INSTANCE, "--work-dir", str(tmp_path)]
    out = io.StringIO()
    assert stop.main([*target, "--timeout", "120", "--poll-sec", "0.5"], out) == 0, out.getvalue()
    record = read_exit_record(local.config.checkpoint_location)
    assert record is not None and record.stopped_by == contract.STOP_BY_OPERATOR
    checks = len(supervisor.decisions)
    poll(lambda: len(supervisor.decisions) >= checks + 5, "five checks after the stop", 30)
    assert len(supervisor.restarts) == 2, "an operator's stop is not restarted"
    assert supervisor.alarms == []
    assert supervisor.state.stopped_by_operator
    assert not supervisor.errors, supervisor.errors

    # make status shows the supervisor's state.
    out = io.StringIO()
    assert status.main([*target, "--json"], out) == 0, out.getvalue()
    shown = status_supervisor(out.getvalue())
    assert shown["restarts_in_window"] == 2
    assert shown["stopped_by_operator"] is True
    assert shown["last_reason"] == contract.EXIT_STOPPED_ON_REQUEST


def status_supervisor(text: str) -> dict[str, Any]:
    found = json.loads(text)["supervisor"]
    assert isinstance(found, dict), text
    return found


def test_a_batch_that_always_fails_gets_the_budget_then_one_alarm_then_kafka_back_delivers(
    kafka_on_s3_emulators: Emulators, make_local: MakeLocal, supervised: list[LocalSupervisor]
) -> None:
    """Kafka down: the batch with failure records fails every run (never
    committed), the budget's restarts, one alarm; then the broker back and a
    restart deliver every failure record once. (The Kafka-down case of
    test_failure_modes.py was a prefix and a suffix of this one: one job start
    and one set of emulators less.)"""
    emulators = kafka_on_s3_emulators
    local = make_local(emulators, INSTANCE, shards=1)
    supervisor = running_supervised(local, supervised, mix(200, seed=91, prefix="ff-a"))
    committed_before = local.committed_batches()

    # The failure topic goes away: every batch with a failure record fails.
    emulators.stop_kafka()
    local.produce(mix(200, seed=92, prefix="ff-b", malformed_share=0.05))
    poll(lambda: supervisor.alarms != [], "the budget alarm", 600, interval=1)
    assert [d.action for d in supervisor.decisions if d.action != "none"] == [
        "restart",
        "restart",
        "alarm",
    ]
    assert all(d.reason == contract.EXIT_BATCH_FAILED for d in supervisor.restarts)
    alarm = supervisor.alarms[0]
    assert "restart budget spent: 2 restarts" in alarm
    assert contract.EXIT_BATCH_FAILED in alarm
    assert supervisor.state.gave_up == GAVE_UP_BUDGET
    assert local.job is not None and not local.job.running
    checks = len(supervisor.decisions)
    poll(lambda: len(supervisor.decisions) >= checks + 3, "three checks after the alarm", 30)
    assert len(supervisor.restarts) == 2 and len(supervisor.alarms) == 1
    assert local.runs == 3, "the first run and two restarts"
    saved = SupervisorState.from_json(supervisor.state_path.read_text(encoding="utf-8"))
    assert saved.gave_up == GAVE_UP_BUDGET and len(saved.restarts) == 2
    code = local.job.wait(timeout=30)
    assert code != 0, "a batch whose failure records cannot be delivered must fail the job"
    assert "query failed" in local.log_path.read_text(encoding="utf-8", errors="replace")
    planned = set(local.checkpoint_offsets())
    committed = local.committed_batches()
    assert planned - committed, "the failed batch must not be committed"
    assert committed >= committed_before

    # The broker back, the job restarted by hand (the supervisor has given up):
    # every failure record delivered, once.
    supervisor.stop()
    emulators.start_kafka()
    local.start_job()
    local.wait_until_accounted(timeout=240)
    assert local.stop_job() == 0, local.log_tail()
    summary = local.summary()
    assert summary.ok, summary.problems
    assert summary.failure_records == 4 + 10  # 2 % of ff-a, 5 % of ff-b
    assert summary.duplicate_ids == 0


def test_a_refused_configuration_is_not_restarted_and_alarms_at_once(
    emulators: Emulators, make_local: MakeLocal, supervised: list[LocalSupervisor]
) -> None:
    local = make_local(emulators, INSTANCE, shards=1)
    # Someone raised the stream's retention beyond the de-duplication horizon
    # outside the stack: the job refuses to start (exit 2, job/driver.py).
    horizon = local.config.dedup_horizon_hours
    local.kinesis.increase_stream_retention_period(
        StreamName=local.config.stream_name, RetentionPeriodHours=horizon + 24
    )
    local.start_job()
    supervisor = supervise(local, supervised)
    poll(lambda: supervisor.alarms != [], "the alarm", 300, interval=1)
    assert local.job is not None and local.job.wait(timeout=30) == 2
    assert supervisor.restarts == []
    alarm = supervisor.alarms[0]
    assert contract.EXIT_CONFIG_REFUSED in alarm and "a restart cannot cure it" in alarm
    assert f"dedup_horizon_hours is {horizon}" in alarm, alarm
    checks = len(supervisor.decisions)
    poll(lambda: len(supervisor.decisions) >= checks + 3, "three checks after the alarm", 30)
    assert supervisor.restarts == [] and len(supervisor.alarms) == 1
    assert local.runs == 1
