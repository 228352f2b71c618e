"""local/supervisor/serverless.py's ``local_service``: each service a test
starts sees only its own application, although moto keeps its state in this
process, not in the server (the application guard finds the application by
name, so a stale one of the same name is acted on instead)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from local.supervisor.serverless import local_service


def test_each_local_service_starts_with_only_its_own_application() -> None:
    local: Any = SimpleNamespace(
        name="orders-eu-west-1", config=SimpleNamespace(region="eu-west-1")
    )
    seen = []
    for _ in range(2):
        with local_service(local) as service:
            applications = service.client("emr-serverless").list_applications()["applications"]
            seen.append([application["id"] for application in applications])
            assert seen[-1] == [service.application_id]
    assert len(seen) == 2
