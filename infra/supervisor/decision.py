"""The supervisor's decision: is the job down, and what to do about it. Pure.

Why a supervisor at all: the EMR step completes once YARN accepts the job
(``spark.yarn.submit.waitAppCompletion=false``), and ``AWS::EMR::Step`` has no
retry (its ``ActionOnFailure`` is CONTINUE or CANCEL_AND_WAIT only,
https://docs.aws.amazon.com/AWSCloudFormation/latest/TemplateReference/aws-resource-emr-step.html).
Once YARN's own attempts are spent a dead job stays dead. Managed engines
restart on their own with a budget (EMR Serverless streaming jobs:
``maxFailedAttemptsPerHour``, default 5,
https://docs.aws.amazon.com/emr/latest/EMR-Serverless-UserGuide/streaming-jobs.html);
this is that budget for a job on a cluster.

:func:`decide` takes what the adapters observed (the lease, the exit record,
whether a start is under way, the cluster, the versions and the stack), the
supervisor's durable state and the policy, and returns one action: ``none``,
``restart``, ``handback`` or ``alarm``, with the next state. No I/O here:
the Lambda (``infra/supervisor/handler.py``) and the local harness
(``local/supervisor/emr.py``) are adapters around it, so both run the
same rules and the tests drive them with a clock of their own.

The rules, in order:

1. The lease is held and fresh: the job runs. A give-up is cleared (someone
   started it again), the time is remembered. Nothing else to do, unless it
   runs another version than the stack's step (both known: the lease's
   ``version``, :mod:`model.job_version`): a deploy whose step had handed over
   failed further on, and CloudFormation's rollback made the old step the
   stack's again, but a step cannot be withdrawn. Then ``handback``: the
   stack's own start (the restart's), whose launcher hands over through the
   lease, so that exactly one job runs, on the stack's version. Only when the
   stack is settled (:data:`STACK_SETTLED`; never while an update or its
   rollback is under way: a forward update's step hands over by itself), no
   operator's stop marker is set, the cluster is ready and no start is under
   way (a hand-back's step is one); after a hand-back that did not take, not
   again within ``start_grace_sec`` (or the back-off, if longer). Hand-backs
   are kept and published with the restarts but do not spend the restart
   budget: the job is not down, and a budget spent on a rollback would leave
   none for a crash that follows it.
2. An operator asked the job to stop (their stop marker is present, or was
   seen while the job still ran): left stopped, no alarm, whether or not the
   job wrote its exit record before it died (a SIGKILL or an OOM kill while
   it finished its batch). Only a deliberate new start (``make redeploy``,
   whose launcher clears the marker) brings it back.
3. A start is under way (a restart step not finished yet, or a restart less
   than ``start_grace_sec`` ago whose job has not taken its lease yet): wait.
   A restarted job that took its lease (``last_seen_running`` later than the
   restart) and died is not starting any more: it is judged at once, and
   restarted after the back-off, however soon after the restart it died.
4. Which exit explains the job being down: the exit record, if it was
   written after the job was last seen running and after the last restart (the
   job writes it before releasing its lease, so a record older than that is an
   earlier run's); otherwise ``vanished`` (seen running, left no record:
   SIGKILL, a lost node) or ``never_started``.
5. A stop on request by an operator (``make stop-job``, SIGTERM): left
   stopped, no alarm, until the job runs again.
6. A stop by a deploy's handover: the new version is expected to take the
   lease; after ``handover_grace_sec`` without it (its step failed), the
   deployed version is restarted like any other exit: a failed handover
   cannot leave the instance down for ever.
7. An exit a restart cannot cure (``model.contract.UNRECOVERABLE_EXITS``):
   alarm once with the reason, never restart.
8. Anything else: restart, unless the budget (``max_restarts`` in the rolling
   ``window_sec``) is spent, which alarms once naming the last exit and stops
   restarting; between restarts a back-off doubling from ``backoff_sec`` up to
   ``backoff_max_sec``.

After an alarm the supervisor has given up: it does nothing until the job runs
again (``make redeploy``), or a newer exit record arrives.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Final, Literal

from model import contract
from model.exit_record import ExitRecord

Action = Literal["none", "restart", "alarm", "handback"]
ClusterState = Literal["ready", "starting", "gone"]

GAVE_UP_BUDGET: Final = "budget"
GAVE_UP_CLUSTER: Final = "cluster"
# The reason of a hand-back to the stack's version.
HANDBACK: Final = "handback"
# The stack's statuses with no operation under way and its resources as its
# template says: a create or an update completed, or an update's rollback did
# (CloudFormation's stack status codes,
# https://docs.aws.amazon.com/AWSCloudFormation/latest/UserGuide/view-stack-events.html#cfn-console-view-stack-data-resources-status-codes).
# Every *_IN_PROGRESS (an update, its cleanup, its rollback) and every
# *_FAILED one is not: the step that counts may still change.
STACK_SETTLED: Final = frozenset({"CREATE_COMPLETE", "UPDATE_COMPLETE", "UPDATE_ROLLBACK_COMPLETE"})


@dataclass(frozen=True)
class Policy:
    """The restart budget and the bounds of the waits, in seconds."""

    max_restarts: int = 5
    window_sec: float = 3_600.0
    backoff_sec: float = 60.0
    backoff_max_sec: float = 600.0
    # A restart's job must hold the lease within this (YARN's start, the
    # lease wait): until then the supervisor waits instead of restarting again.
    start_grace_sec: float = 600.0
    # A handover's new version must hold the lease within this after the old
    # one stopped (the launcher submits once the lease is free).
    handover_grace_sec: float = 600.0

    def __post_init__(self) -> None:
        if not 1 <= self.max_restarts <= 100:
            raise ValueError(f"max_restarts: {self.max_restarts}; allowed: 1..100")
        for name in ("window_sec", "backoff_sec", "backoff_max_sec"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name}: {getattr(self, name)}; allowed: > 0")
        for name in ("start_grace_sec", "handover_grace_sec"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name}: {getattr(self, name)}; allowed: >= 0")
        if self.backoff_max_sec < self.backoff_sec:
            raise ValueError(
                f"backoff_max_sec: {self.backoff_max_sec}; allowed: >= backoff_sec "
                f"({self.backoff_sec})"
            )

    def backoff(self, restarts_in_window: int) -> float:
        """The wait after the last restart before the next one: none before
        the first, then ``backoff_sec`` doubling per restart, capped."""
        if restarts_in_window == 0:
            return 0.0
        return float(min(self.backoff_sec * 2 ** (restarts_in_window - 1), self.backoff_max_sec))


@dataclass(frozen=True)
class Observation:
    """What the adapters saw, at ``now`` (epoch seconds)."""

    now: float
    running: bool  # the lease is held and fresh
    exit: ExitRecord | None = None  # the last exit record, if any
    start_pending: bool = False  # a start the supervisor asked for is still under way
    cluster: ClusterState = "ready"
    cluster_detail: str = ""
    # An operator's stop marker is present (``make stop-job``; not a
    # handover's, whose first word is ``handover``: model.graceful_stop).
    stop_requested: bool = False
    # The version the running job runs (its lease's, model.job_version) and the
    # one the stack's own start runs; None: unknown, never handed back.
    job_version: str | None = None
    stack_version: str | None = None
    # The stack's status (DescribeStacks); the handler reads it only when the
    # two versions differ. None: not read.
    stack_status: str | None = None

    @property
    def version_differs(self) -> bool:
        """The job runs a known version other than the stack's (known) one."""
        return (
            self.job_version is not None
            and self.stack_version is not None
            and self.job_version != self.stack_version
        )


@dataclass(frozen=True)
class SupervisorState:
    """What the supervisor keeps between checks (an S3 object on AWS)."""

    restarts: tuple[float, ...] = ()  # when it restarted, within the window
    last_reason: str | None = None  # the exit reason it last acted on
    last_detail: str = ""
    gave_up: str | None = None  # why it stopped restarting; None while it restarts
    gave_up_at: float | None = None
    last_seen_running: float | None = None
    since: float | None = None  # its first check
    # An operator asked the job to stop (an exit record saying so, or their
    # stop marker seen) and it has not been started again since.
    stopped_by_operator: bool = False
    checks: int = field(default=0)
    # When it handed back to the stack's version, within the window (not
    # counted against the restart budget).
    handbacks: tuple[float, ...] = ()

    def to_json(self) -> str:
        raw = asdict(self)
        raw["restarts"] = list(self.restarts)
        raw["handbacks"] = list(self.handbacks)
        return json.dumps(raw, sort_keys=True)

    @classmethod
    def from_json(cls, text: str | bytes, where: str = "supervisor state") -> SupervisorState:
        try:
            raw: Any = json.loads(text)
        except ValueError as exc:
            raise ValueError(f"{where}: not JSON ({exc})") from exc
        if not isinstance(raw, dict):
            raise ValueError(f"{where}: expected a JSON object, got {type(raw).__name__}")
        known = {f for f in cls.__dataclass_fields__}
        unknown = sorted(set(raw) - known)
        if unknown:
            raise ValueError(f"{where}: unknown field {unknown[0]!r}; allowed: {sorted(known)}")
        for name in ("restarts", "handbacks"):
            try:
                raw[name] = tuple(float(t) for t in raw.get(name, ()))
            except (TypeError, ValueError) as exc:
                raise ValueError(f"{where}: {name} must be a list of epoch seconds") from exc
        return cls(**raw)

    def restarts_within(self, now: float, window_sec: float) -> tuple[float, ...]:
        return tuple(t for t in self.restarts if now - t < window_sec)

    def handbacks_within(self, now: float, window_sec: float) -> tuple[float, ...]:
        return tuple(t for t in self.handbacks if now - t < window_sec)


@dataclass(frozen=True)
class Decision:
    action: Action
    reason: str  # a model.contract EXIT_* name, or "running" / "starting" / HANDBACK
    message: str  # one line: for the log, make status and the alarm
    state: SupervisorState


def current_exit(observation: Observation, state: SupervisorState) -> ExitRecord | None:
    """The exit record when it explains the job's current absence: written
    after the job was last seen running and after the last restart."""
    record = observation.exit
    if record is None:
        return None
    marks = [t for t in (state.last_seen_running, *state.restarts[-1:]) if t is not None]
    if marks and record.at < max(marks):
        return None
    return record


def decide(observation: Observation, state: SupervisorState, policy: Policy) -> Decision:
    """One check: see the module's docstring for the rules."""
    now = observation.now
    since = state.since if state.since is not None else now
    state = replace(
        state,
        since=since,
        restarts=state.restarts_within(now, policy.window_sec),
        handbacks=state.handbacks_within(now, policy.window_sec),
        checks=state.checks + 1,
    )
    if observation.running:
        running = replace(
            state,
            last_seen_running=now,
            gave_up=None,
            gave_up_at=None,
            # A job running with an operator's marker is stopping: remember
            # it, should it die before its exit record says so.
            stopped_by_operator=observation.stop_requested,
        )
        return _running(observation, running, policy)

    if observation.cluster == "gone":
        return _give_up(
            state,
            GAVE_UP_CLUSTER,
            contract.EXIT_VANISHED,
            f"the cluster cannot run the job ({observation.cluster_detail or 'terminated'}); "
            "redeploy the stack",
            now,
        )
    record = current_exit(observation, state)
    if observation.stop_requested or (state.stopped_by_operator and record is None):
        return Decision(
            "none",
            contract.EXIT_STOPPED_ON_REQUEST,
            "stopped by an operator (their stop marker "
            + ("is present" if observation.stop_requested else "was seen while it ran")
            + "; an exit record is not needed); not restarted until it is started again "
            "(make redeploy)",
            replace(
                state,
                stopped_by_operator=True,
                last_reason=contract.EXIT_STOPPED_ON_REQUEST,
                last_detail="an operator's stop marker",
            ),
        )
    if state.gave_up is not None and (record is None or record.at <= (state.gave_up_at or 0)):
        return Decision(
            "none",
            state.last_reason or "unknown",
            f"gave up ({state.gave_up}): {state.last_reason}: {state.last_detail}; "
            "start the job again (make redeploy) once the cause is fixed",
            state,
        )
    state = replace(state, gave_up=None, gave_up_at=None)
    if observation.start_pending or observation.cluster == "starting":
        what = "a start is under way" if observation.start_pending else "the cluster is starting"
        return Decision("none", "starting", what, state)
    if record is None:
        return _without_exit(state, since, now, policy)
    return _after_exit(record, state, now, policy)


def _running(observation: Observation, state: SupervisorState, policy: Policy) -> Decision:
    """The job runs: nothing to do, unless it runs another version than the
    stack's step and may be handed back now (rule 1)."""
    if not observation.version_differs:
        return Decision("none", "running", "the job runs (its lease is held)", state)
    differs = (
        f"the job runs version {observation.job_version}, the stack's step "
        f"{observation.stack_version}"
    )
    wait = _handback_wait(observation, state, policy)
    if wait:
        return Decision("none", "running", f"{differs}; {wait}", state)
    handed = replace(
        state,
        handbacks=(*state.handbacks, observation.now),
        last_reason=HANDBACK,
        last_detail=f"{differs} (stack {observation.stack_status})",
    )
    return Decision(
        "handback",
        HANDBACK,
        f"{differs} and the stack is {observation.stack_status}: adding the stack's step, "
        "which hands over through the lease",
        handed,
    )


def _handback_wait(observation: Observation, state: SupervisorState, policy: Policy) -> str:
    """Why a hand-back waits, one clause; empty when it may go now."""
    if observation.stop_requested:
        return "an operator asked it to stop: left alone"
    if observation.start_pending:
        return "a start is under way"
    if observation.cluster != "ready":
        return f"the cluster is {observation.cluster}: waiting"
    if observation.stack_status not in STACK_SETTLED:
        return f"the stack is {observation.stack_status or 'unknown'}: waiting until it settles"
    if state.handbacks:
        wait = max(policy.start_grace_sec, policy.backoff(len(state.handbacks)))
        since = observation.now - state.handbacks[-1]
        if since < wait:
            return f"handed back {since:.0f}s ago; next try in {wait - since:.0f}s"
    return ""


def _without_exit(state: SupervisorState, since: float, now: float, policy: Policy) -> Decision:
    """The job is down and left no exit record: still starting (within the
    start grace, after a deploy or a restart), or a restart to try."""
    last_restart = state.restarts[-1] if state.restarts else None
    # The restarted job took its lease (seen running since): it is not
    # starting any more, it died; judged now, restarted after the back-off.
    took_lease = (
        last_restart is not None
        and state.last_seen_running is not None
        and state.last_seen_running >= last_restart
    )
    if last_restart is not None and not took_lease and now - last_restart < policy.start_grace_sec:
        return Decision(
            "none",
            "starting",
            f"restarted {now - last_restart:.0f}s ago; waiting up to "
            f"{policy.start_grace_sec:.0f}s for it to take the lease",
            state,
        )
    if state.last_seen_running is None and last_restart is None:
        if now - since < policy.start_grace_sec:
            return Decision("none", "starting", "waiting for the deployed step's job", state)
        reason, detail = contract.EXIT_NEVER_STARTED, "the job never took its lease"
    elif state.last_seen_running is not None and (
        last_restart is None or state.last_seen_running >= last_restart
    ):
        reason, detail = contract.EXIT_VANISHED, "the job stopped without an exit record"
    else:
        reason, detail = contract.EXIT_NEVER_STARTED, "the restarted job never took its lease"
    return _curable(state, reason, detail, now, policy)


def _after_exit(record: ExitRecord, state: SupervisorState, now: float, policy: Policy) -> Decision:
    """The job is down and its exit record says why: a stop on request, an
    exit no restart cures, or one to restart within the budget."""
    detail = record.line()
    if record.reason == contract.EXIT_STOPPED_ON_REQUEST:
        return _stopped_on_request(record, state, now, policy)
    if record.reason in contract.UNRECOVERABLE_EXITS:
        return _give_up(
            state, record.reason, record.reason, f"{detail}; a restart cannot cure it", now
        )
    return _curable(state, record.reason, detail, now, policy)


def _stopped_on_request(
    record: ExitRecord, state: SupervisorState, now: float, policy: Policy
) -> Decision:
    """An operator's stop stays stopped; a handover's waits for the new
    version within the handover grace, then counts as a curable exit."""
    detail = record.line()
    if record.stopped_by != contract.STOP_BY_HANDOVER:
        stopped = replace(
            state, last_reason=record.reason, last_detail=detail, stopped_by_operator=True
        )
        return Decision(
            "none",
            record.reason,
            f"stopped by an operator ({record.detail}); not restarted until it is started "
            "again (make redeploy)",
            stopped,
        )
    waited = now - record.at
    if waited < policy.handover_grace_sec:
        return Decision(
            "none",
            record.reason,
            f"handed over {waited:.0f}s ago; waiting up to {policy.handover_grace_sec:.0f}s "
            "for the new version to take the lease",
            state,
        )
    return _curable(
        state,
        record.reason,
        f"{detail}; the handover's new version did not start within "
        f"{policy.handover_grace_sec:.0f}s",
        now,
        policy,
    )


def _curable(
    state: SupervisorState, reason: str, detail: str, now: float, policy: Policy
) -> Decision:
    restarts = state.restarts
    if len(restarts) >= policy.max_restarts:
        return _give_up(
            state,
            GAVE_UP_BUDGET,
            reason,
            f"restart budget spent: {len(restarts)} restarts in the last "
            f"{policy.window_sec:.0f}s; last exit: {reason}: {detail}",
            now,
        )
    wait = policy.backoff(len(restarts))
    if restarts and now - restarts[-1] < wait:
        return Decision(
            "none",
            reason,
            f"{reason}: backing off, next restart in {wait - (now - restarts[-1]):.0f}s "
            f"({len(restarts)} of {policy.max_restarts} restarts used)",
            replace(state, last_reason=reason, last_detail=detail),
        )
    restarted = replace(
        state,
        restarts=(*restarts, now),
        last_reason=reason,
        last_detail=detail,
        stopped_by_operator=False,
    )
    return Decision(
        "restart",
        reason,
        f"restart {len(restarts) + 1} of {policy.max_restarts} in the window: {reason}: {detail}",
        restarted,
    )


def _give_up(state: SupervisorState, why: str, reason: str, message: str, now: float) -> Decision:
    given_up = replace(state, gave_up=why, gave_up_at=now, last_reason=reason, last_detail=message)
    return Decision("alarm", reason, message, given_up)
