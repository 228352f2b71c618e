"""The supervisor's pure decision (infra/supervisor/decision.py), on a clock
of the test's own: restarts within the budget and its back-off, the budget's
alarm naming the last exit, exits a restart cannot cure, stops on purpose,
a handover that did not complete, and the state's JSON."""

from __future__ import annotations

import random
from dataclasses import replace

import pytest

from infra.supervisor.decision import (
    GAVE_UP_BUDGET,
    HANDBACK,
    STACK_SETTLED,
    Decision,
    Observation,
    Policy,
    SupervisorState,
    current_exit,
    decide,
)
from model import contract
from model.exit_record import ExitRecord

# The Lambda's default budget (Policy's defaults, the instance config's: 5
# restarts an hour, a back-off from 60 s doubling to 600 s), with the start's
# and the handover's grace apart (300 s, 900 s) so that a case tells them apart.
POLICY = Policy(start_grace_sec=300, handover_grace_sec=900)


def record(at: float, reason: str = contract.EXIT_BATCH_FAILED, **kw: object) -> ExitRecord:
    code = {
        contract.EXIT_BATCH_FAILED: 1,
        contract.EXIT_CONFIG_REFUSED: 2,
        contract.EXIT_CHECKPOINT_REFUSED: 2,
        contract.EXIT_STOPPED_ON_REQUEST: 0,
        contract.EXIT_LEASE_LOST: 4,
    }.get(reason, 1)
    values: dict[str, object] = {
        "code": code,
        "reason": reason,
        "detail": f"{reason} detail",
        "at": at,
        "owner": "h:1",
    }
    values.update(kw)
    return ExitRecord(**values)  # type: ignore[arg-type]


def running(now: float, state: SupervisorState) -> Decision:
    return decide(Observation(now, running=True), state, POLICY)


def seen_running_at(t: float) -> SupervisorState:
    return running(t, SupervisorState()).state


def test_a_running_job_is_left_alone_and_remembered() -> None:
    decision = running(100, SupervisorState())
    assert decision.action == "none" and decision.reason == "running"
    assert decision.state.last_seen_running == 100
    assert decision.state.since == 100


def test_a_failed_batch_is_restarted_at_once() -> None:
    state = seen_running_at(100)
    decision = decide(Observation(200, running=False, exit=record(150)), state, POLICY)
    assert decision.action == "restart"
    assert decision.reason == contract.EXIT_BATCH_FAILED
    assert decision.state.restarts == (200,)
    assert "restart 1 of 5" in decision.message


def test_a_killed_job_leaves_no_record_and_is_restarted_as_vanished() -> None:
    old = record(50)  # the run before: older than the run the supervisor saw
    state = seen_running_at(100)
    decision = decide(Observation(200, running=False, exit=old), state, POLICY)
    assert decision.action == "restart"
    assert decision.reason == contract.EXIT_VANISHED


def test_a_restart_is_given_time_to_take_the_lease() -> None:
    state = replace(seen_running_at(100), restarts=(200,))
    waiting = decide(Observation(200 + 299, running=False, exit=record(150)), state, POLICY)
    assert waiting.action == "none" and waiting.reason == "starting"
    # Past the grace with no record of its own: it never started, restart again.
    late = decide(Observation(200 + 301, running=False, exit=record(150)), state, POLICY)
    assert late.action == "restart"
    assert late.reason == contract.EXIT_NEVER_STARTED


def test_a_start_under_way_is_waited_for() -> None:
    state = seen_running_at(100)
    obs = Observation(200, running=False, exit=record(150), start_pending=True)
    assert decide(obs, state, POLICY).action == "none"


def test_back_off_doubles_between_restarts() -> None:
    assert [POLICY.backoff(n) for n in range(6)] == [0, 60, 120, 240, 480, 600]
    state = replace(seen_running_at(100), restarts=(1_000, 1_100))
    failed = record(1_150)
    early = decide(Observation(1_100 + 119, running=False, exit=failed), state, POLICY)
    assert early.action == "none"
    assert "backing off, next restart in 1s (2 of 5 restarts used)" in early.message
    due = decide(Observation(1_100 + 120, running=False, exit=failed), state, POLICY)
    assert due.action == "restart"


def test_exactly_the_budget_then_one_alarm_naming_the_last_exit() -> None:
    """A batch that always fails: each run fails soon after its restart."""
    state = seen_running_at(0)
    now = 10.0
    actions: list[Decision] = []
    failure = record(5, detail="batch 3 failed: TopicAuthorizationException")
    while now < 3_000:
        decision = decide(Observation(now, running=False, exit=failure), state, POLICY)
        if decision.action != "none":
            actions.append(decision)
        if decision.action == "restart":  # the restarted job fails 20 s later
            failure = replace(failure, at=now + 20)
        state = decision.state
        now += 30
    kinds = [d.action for d in actions]
    assert kinds == ["restart"] * 5 + ["alarm"], kinds
    alarm = actions[-1]
    assert alarm.reason == contract.EXIT_BATCH_FAILED
    assert "restart budget spent: 5 restarts in the last 3600s" in alarm.message
    assert "TopicAuthorizationException" in alarm.message
    assert alarm.state.gave_up == GAVE_UP_BUDGET
    # Given up: no more restarts, no repeated alarm, on the same record.
    again = decide(Observation(now, running=False, exit=failure), alarm.state, POLICY)
    assert again.action == "none" and "gave up (budget)" in again.message


def test_the_window_rolls_restarts_out() -> None:
    state = replace(seen_running_at(0), restarts=(10, 20, 30, 40, 50))
    at_edge = decide(Observation(3_609, running=False, exit=record(3_600)), state, POLICY)
    assert at_edge.action == "alarm"
    rolled = decide(Observation(3_611, running=False, exit=record(3_600)), state, POLICY)
    assert rolled.action == "restart", "the first restart left the window"
    assert rolled.state.restarts == (20, 30, 40, 50, 3_611)


@pytest.mark.parametrize("reason", [contract.EXIT_CONFIG_REFUSED, contract.EXIT_CHECKPOINT_REFUSED])
def test_an_exit_a_restart_cannot_cure_alarms_at_once_and_is_never_restarted(reason: str) -> None:
    state = seen_running_at(100)
    refused = record(150, reason, detail="checkpoint holds dropDuplicatesWithinWatermark state")
    decision = decide(Observation(200, running=False, exit=refused), state, POLICY)
    assert decision.action == "alarm"
    assert decision.reason == reason
    assert decision.state.restarts == ()
    assert "a restart cannot cure it" in decision.message
    assert "dropDuplicatesWithinWatermark" in decision.message
    later = decide(Observation(5_000, running=False, exit=refused), decision.state, POLICY)
    assert later.action == "none" and later.state.restarts == ()


def test_an_operator_stop_is_left_stopped_without_an_alarm() -> None:
    state = seen_running_at(100)
    stopped = record(150, contract.EXIT_STOPPED_ON_REQUEST, stopped_by=contract.STOP_BY_OPERATOR)
    for now in (200, 10_000, 100_000):
        decision = decide(Observation(now, running=False, exit=stopped), state, POLICY)
        assert decision.action == "none"
        assert decision.state.stopped_by_operator
        assert "stopped by an operator" in decision.message
        state = decision.state
    resumed = running(100_100, state)
    assert not resumed.state.stopped_by_operator


def test_a_handover_is_waited_for_then_a_new_version_that_never_came_is_restarted() -> None:
    """The new step failed after the old job stopped (launcher exit 8, or a
    spark-submit error): the stop was asked for, but by a handover, so it
    holds only for the handover's grace."""
    state = seen_running_at(100)
    handed = record(150, contract.EXIT_STOPPED_ON_REQUEST, stopped_by=contract.STOP_BY_HANDOVER)
    waiting = decide(Observation(150 + 899, running=False, exit=handed), state, POLICY)
    assert waiting.action == "none" and "handed over 899s ago" in waiting.message
    late = decide(Observation(150 + 901, running=False, exit=handed), state, POLICY)
    assert late.action == "restart"
    assert "did not start within 900s" in late.message
    # The new version did start: the supervisor sees it running and does nothing.
    assert running(150 + 300, waiting.state).action == "none"


def test_a_job_running_again_clears_a_give_up() -> None:
    refused = record(150, contract.EXIT_CONFIG_REFUSED)
    gave_up = decide(Observation(200, running=False, exit=refused), seen_running_at(100), POLICY)
    assert gave_up.state.gave_up == contract.EXIT_CONFIG_REFUSED
    back = running(300, gave_up.state)
    assert back.state.gave_up is None
    failed = decide(Observation(400, running=False, exit=record(350)), back.state, POLICY)
    assert failed.action == "restart"


def test_a_newer_record_after_a_give_up_is_judged_afresh() -> None:
    refused = record(150, contract.EXIT_CONFIG_REFUSED)
    gave_up = decide(Observation(200, running=False, exit=refused), seen_running_at(100), POLICY)
    # The operator fixed the config and redeployed; the job ran briefly and failed
    # between two checks.
    failed = decide(Observation(400, running=False, exit=record(350)), gave_up.state, POLICY)
    assert failed.action == "restart"


def test_first_deploy_waits_for_the_stack_step_then_starts_the_job() -> None:
    first = decide(Observation(0, running=False), SupervisorState(), POLICY)
    assert first.action == "none" and first.reason == "starting"
    late = decide(Observation(301, running=False), first.state, POLICY)
    assert late.action == "restart" and late.reason == contract.EXIT_NEVER_STARTED


def test_a_cluster_that_is_gone_alarms_once() -> None:
    obs = Observation(200, running=False, cluster="gone", cluster_detail="TERMINATED")
    decision = decide(obs, seen_running_at(100), POLICY)
    assert decision.action == "alarm" and "TERMINATED" in decision.message
    starting = Observation(200, running=False, exit=record(150), cluster="starting")
    assert decide(starting, seen_running_at(100), POLICY).action == "none"


def test_current_exit_ignores_records_older_than_the_last_run_or_restart() -> None:
    state = replace(SupervisorState(), last_seen_running=100.0, restarts=(200.0,))
    assert current_exit(Observation(300, False, exit=record(150)), state) is None
    assert current_exit(Observation(300, False, exit=record(250)), state) is not None


def test_state_round_trips_and_bad_state_names_the_field() -> None:
    state = decide(Observation(200, False, exit=record(150)), seen_running_at(100), POLICY).state
    assert SupervisorState.from_json(state.to_json()) == state
    with pytest.raises(ValueError, match="unknown field 'paused'"):
        SupervisorState.from_json('{"paused": true}', "s3://b/supervisor.json")
    with pytest.raises(ValueError, match="restarts must be a list"):
        SupervisorState.from_json('{"restarts": ["x"]}')


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("max_restarts", 0, "max_restarts: 0; allowed: 1..100"),
        ("window_sec", 0, "window_sec: 0; allowed: > 0"),
        ("backoff_max_sec", 10, "backoff_max_sec: 10; allowed: >= backoff_sec"),
        ("start_grace_sec", -1, "start_grace_sec: -1; allowed: >= 0"),
    ],
)
def test_a_bad_policy_names_the_field(field: str, value: float, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Policy(**{field: value})  # type: ignore[arg-type]


def test_a_launcher_that_gave_up_on_the_handover_is_followed_by_a_restart() -> None:
    """Launcher exit 8: the old version held the lease past the bound and the
    new one was not submitted. Once nothing holds the lease (the old one
    stopped later, or died), the deployed version is restarted."""
    state = seen_running_at(100)
    gave_up = record(150, contract.EXIT_HANDOVER_TIMEOUT, code=8)
    decision = decide(Observation(200, running=False, exit=gave_up), state, POLICY)
    assert decision.action == "restart"
    assert decision.reason == contract.EXIT_HANDOVER_TIMEOUT


def test_a_restarted_job_killed_soon_after_its_lease_is_restarted_after_the_back_off() -> None:
    """The case seen locally: a restarted job ran 15 s and was
    killed (no exit record). It is restarted after the back-off (here 1 s),
    not ``start_grace_sec`` (240 s) after the restart."""
    policy = Policy(max_restarts=4, backoff_sec=1, backoff_max_sec=2, start_grace_sec=240)
    state = decide(Observation(0, running=True), SupervisorState(), policy).state
    first = decide(Observation(10, running=False), state, policy)
    assert first.action == "restart" and first.reason == contract.EXIT_VANISHED
    state = first.state
    for t in range(11, 26):  # the restarted job holds its lease 15 s
        state = decide(Observation(t, running=t >= 12), state, policy).state
    killed_at = 26
    restarted_at = None
    for t in range(killed_at, killed_at + 240):
        decision = decide(Observation(t, running=False), state, policy)
        state = decision.state
        if decision.action == "restart":
            restarted_at = t
            break
    assert restarted_at is not None
    assert restarted_at - killed_at <= policy.backoff(1), restarted_at - killed_at
    assert decision.reason == contract.EXIT_VANISHED


@pytest.mark.parametrize("seed", range(5))
def test_repeated_kills_at_random_moments_after_each_recovery_are_each_restarted_soon(
    seed: int,
) -> None:
    """A simulated timeline, checked every second: after each restart the job
    takes its lease after a random start time, then is SIGKILLed (no exit
    record) at a random moment, mostly within ``start_grace_sec``. Every kill
    is followed by a restart within the back-off (plus one check), and every
    restart but the ones the back-off delays comes as soon as it is due."""
    rng = random.Random(seed)
    policy = Policy(
        max_restarts=8, window_sec=3_600, backoff_sec=2, backoff_max_sec=8, start_grace_sec=300
    )
    kills = 6
    state = SupervisorState()
    lease_at, killed_at = 0.0, float(rng.randint(30, 120))  # the deployed run
    pending_until = 0.0
    restarts: list[float] = []
    downtimes: list[float] = []
    t = 0.0
    while len(restarts) < kills and t < 20_000:
        running = lease_at <= t < killed_at
        obs = Observation(t, running=running, start_pending=t < pending_until)
        decision = decide(obs, state, policy)
        state = decision.state
        assert decision.action != "alarm", decision.message
        if decision.action == "restart":
            assert not running
            downtimes.append(t - killed_at)
            restarts.append(t)
            # The step is under way for a while, the job then takes its lease
            # and is killed again at a random moment, often well inside the grace.
            pending_until = t + rng.randint(0, 5)
            lease_at = pending_until + rng.randint(1, 10)
            killed_at = lease_at + rng.choice([rng.randint(1, 30), rng.randint(30, 400)])
        t += 1
    assert len(restarts) == kills, (restarts, t)
    for n, downtime in enumerate(downtimes):
        # Restart n+1 waits for the back-off after restart n (counted from
        # the restart, so from the kill it is at most that), plus one check.
        bound = policy.backoff(n) + 1
        assert 0 <= downtime <= bound, (n, downtimes)


def test_a_job_an_operator_stopped_that_died_before_its_exit_record_stays_stopped() -> None:
    """The operator's stop marker is present, the job was
    killed while it finished its batch and wrote no exit record."""
    state = running(100, SupervisorState()).state
    for now in (200, 1_000, 10_000, 100_000):
        decision = decide(Observation(now, running=False, stop_requested=True), state, POLICY)
        assert decision.action == "none", decision.message
        assert decision.reason == contract.EXIT_STOPPED_ON_REQUEST
        assert "stopped by an operator" in decision.message
        state = decision.state
    assert state.restarts == () and state.gave_up is None


def test_a_marker_seen_while_it_ran_keeps_it_stopped_once_the_marker_is_gone() -> None:
    """The job took the marker (deleted it) and was killed before writing its
    exit record: the supervisor saw the marker while the job still ran."""
    stopping = decide(
        Observation(100, running=True, stop_requested=True), SupervisorState(), POLICY
    )
    assert stopping.action == "none" and stopping.state.stopped_by_operator
    later = decide(Observation(200, running=False), stopping.state, POLICY)
    assert later.action == "none" and later.reason == contract.EXIT_STOPPED_ON_REQUEST
    # A deliberate new start (make redeploy: the launcher clears the marker)
    # runs without it; a kill after that is restarted again.
    redeployed = running(5_000, later.state)
    assert not redeployed.state.stopped_by_operator
    killed = decide(Observation(5_100, running=False), redeployed.state, POLICY)
    assert killed.action == "restart" and killed.reason == contract.EXIT_VANISHED


def test_a_newer_failure_under_an_operators_marker_is_not_restarted() -> None:
    state = running(100, SupervisorState()).state
    failed = record(150)  # the batch failed before the job saw the marker
    decision = decide(
        Observation(200, running=False, exit=failed, stop_requested=True), state, POLICY
    )
    assert decision.action == "none" and decision.state.restarts == ()


# --------------------------------------------------------------------------- hand-back
# A deploy's step handed over to v2, the update failed further on and
# CloudFormation rolled back: the stack's step is v1 again, v2 runs on.


def on_v2(now: float, status: str | None = "UPDATE_ROLLBACK_COMPLETE", **kw: object) -> Observation:
    values: dict[str, object] = {
        "running": True,
        "job_version": "v2",
        "stack_version": "v1",
        "stack_status": status,
    }
    values.update(kw)
    return Observation(now, **values)  # type: ignore[arg-type]


def test_a_job_on_another_version_is_handed_back_once_the_stack_settled() -> None:
    decision = decide(on_v2(100), seen_running_at(50), POLICY)
    assert decision.action == "handback" and decision.reason == HANDBACK
    assert "version v2, the stack's step v1" in decision.message
    assert decision.state.handbacks == (100,)
    assert decision.state.restarts == (), "not a restart: the budget is untouched"
    assert decision.state.last_seen_running == 100


@pytest.mark.parametrize("status", sorted(STACK_SETTLED))
def test_every_settled_status_hands_back(status: str) -> None:
    assert decide(on_v2(100, status), SupervisorState(), POLICY).action == "handback"


@pytest.mark.parametrize(
    "status",
    [
        "UPDATE_IN_PROGRESS",
        "UPDATE_COMPLETE_CLEANUP_IN_PROGRESS",
        "UPDATE_ROLLBACK_IN_PROGRESS",
        "UPDATE_ROLLBACK_COMPLETE_CLEANUP_IN_PROGRESS",
        "UPDATE_ROLLBACK_FAILED",
        "DELETE_IN_PROGRESS",
        None,
    ],
)
def test_no_hand_back_while_the_stack_is_not_settled(status: str | None) -> None:
    """A forward update mid-way hands over by its own step; a rollback mid-way
    may still change which step is the stack's."""
    decision = decide(on_v2(100, status), SupervisorState(), POLICY)
    assert decision.action == "none" and decision.reason == "running"
    assert f"the stack is {status or 'unknown'}" in decision.message
    assert decision.state.handbacks == ()


@pytest.mark.parametrize(
    ("observation", "why"),
    [
        (on_v2(100, stop_requested=True), "an operator asked it to stop"),
        (on_v2(100, start_pending=True), "a start is under way"),
        (on_v2(100, cluster="starting"), "the cluster is starting"),
    ],
)
def test_no_hand_back_under_a_stop_marker_a_start_or_a_starting_cluster(
    observation: Observation, why: str
) -> None:
    decision = decide(observation, SupervisorState(), POLICY)
    assert decision.action == "none" and why in decision.message


@pytest.mark.parametrize(("job", "stack"), [(None, "v1"), ("v1", None), (None, None), ("v1", "v1")])
def test_an_unknown_or_equal_version_is_never_handed_back(
    job: str | None, stack: str | None
) -> None:
    """A lease from before the field (no version), or a target that names none."""
    decision = decide(on_v2(100, job_version=job, stack_version=stack), SupervisorState(), POLICY)
    assert decision.action == "none" and decision.message == "the job runs (its lease is held)"


def test_a_hand_back_that_did_not_take_is_retried_after_the_start_grace_only() -> None:
    """Its step failed (the launcher's handover timed out): the next check
    sees no start under way, and waits start_grace_sec before adding it again."""
    first = decide(on_v2(100), SupervisorState(), POLICY)
    assert first.action == "handback"
    under_way = decide(on_v2(160, start_pending=True), first.state, POLICY)
    assert under_way.action == "none" and "a start is under way" in under_way.message
    failed = decide(on_v2(220), under_way.state, POLICY)
    assert failed.action == "none" and "next try in 180s" in failed.message
    again = decide(on_v2(100 + POLICY.start_grace_sec), failed.state, POLICY)
    assert again.action == "handback"
    assert again.state.handbacks == (100, 100 + POLICY.start_grace_sec)


def test_hand_backs_do_not_spend_the_restart_budget() -> None:
    spent = SupervisorState(restarts=tuple(float(t) for t in range(POLICY.max_restarts)))
    decision = decide(on_v2(100), spent, POLICY)
    assert decision.action == "handback"
    assert len(decision.state.restarts) == POLICY.max_restarts
    # ... and a crash after a hand-back still gets its restart.
    handed = decide(on_v2(100), SupervisorState(), POLICY).state
    crashed = decide(Observation(200, running=False, exit=record(150)), handed, POLICY)
    assert crashed.action == "restart" and "restart 1 of 5" in crashed.message


def test_hand_backs_roll_out_of_the_window_and_round_trip() -> None:
    state = SupervisorState(handbacks=(10.0, 5_000.0))
    assert SupervisorState.from_json(state.to_json()) == state
    # A state saved before hand-backs existed still reads.
    assert SupervisorState.from_json('{"restarts": [1.0]}').handbacks == ()
    with pytest.raises(ValueError, match="handbacks must be a list of epoch seconds"):
        SupervisorState.from_json('{"handbacks": ["x"]}')
    later = decide(Observation(5_100, running=True), state, POLICY)
    assert later.state.handbacks == (5_000.0,)
