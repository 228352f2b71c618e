"""The operator scripts default to ``./cdk.json``, the user's own instances;
these tests name instances of the example (tests/fixtures/cdk.json), so that
default points there for every test of this folder. ``moto_url`` serves the
commands the certs and preflight tests run as child processes."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from moto.server import ThreadedMotoServer

from scripts.status import target as status_target
from tests.fixtures import EXAMPLE_CDK_JSON


@pytest.fixture(autouse=True)
def _example_instances(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(status_target, "DEFAULT_CDK_JSON", EXAMPLE_CDK_JSON)


@pytest.fixture
def moto_url() -> Iterator[str]:
    """A moto server on a free loopback port, for commands run as subprocesses."""

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0)
    server.start()
    host, port = server.get_host_and_port()
    try:
        yield f"http://{host}:{port}"
    finally:
        server.stop()
