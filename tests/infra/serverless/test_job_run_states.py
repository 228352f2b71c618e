"""The EMR Serverless job-run states, written in three places that cannot
share one module: the job-run handler's and the supervisor's Lambda code
(each function's asset holds its own package, and its content hash is the
function's ``S3Key``) and the local emulator's patch. A state the service
adds or one copy drops would make a handler take a live run for an ended one
(and start a second) or wait on an ended one; botocore's model of the API
(``JobRunState``) is the reference all three are held to."""

from __future__ import annotations

import botocore.session

from infra.serverless.job_run_handler import ACTIVE_STATES, ENDED_STATES
from infra.supervisor.serverless import ACTIVE_RUN_STATES
from local import serverless_moto


def _api_states() -> set[str]:
    model = botocore.session.get_session().get_service_model("emr-serverless")
    return set(model.shape_for("JobRunState").enum)


def test_active_and_ended_states_split_the_apis_job_run_states() -> None:
    assert set(ACTIVE_STATES) | ENDED_STATES == _api_states()
    assert not set(ACTIVE_STATES) & ENDED_STATES


def test_the_supervisor_and_the_emulator_name_the_same_active_states() -> None:
    assert set(ACTIVE_RUN_STATES) == set(ACTIVE_STATES)
    assert set(ACTIVE_STATES) == serverless_moto.ACTIVE_RUN_STATES
