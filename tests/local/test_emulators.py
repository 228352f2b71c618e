"""The local Kafka broker (tansu) starts with a scrubbed environment: none of
the caller's credentials or settings reach it (local/emulators.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from local.emulators import start_tansu, tansu_environment
from producer.local_run import FAKE_CREDENTIALS

LEAKS = {
    "AWS_ACCESS_KEY_ID": "AKIAREALREALREALREAL",
    "AWS_SECRET_ACCESS_KEY": "real-secret",
    "AWS_SESSION_TOKEN": "real-token",
    "AWS_PROFILE": "production",
    "AWS_CONFIG_FILE": "/home/operator/.aws/config",
    "AWS_SHARED_CREDENTIALS_FILE": "/home/operator/.aws/credentials",
    "GITHUB_TOKEN": "ghp_real",
    "KAFKA_SASL_PASSWORD": "real",
}


def _environ(pid: int) -> dict[str, str]:
    raw = Path(f"/proc/{pid}/environ").read_bytes()
    pairs = [item.split(b"=", 1) for item in raw.split(b"\0") if b"=" in item]
    return {k.decode(): v.decode() for k, v in pairs}


def test_memory_broker_gets_only_a_path(monkeypatch: pytest.MonkeyPatch) -> None:
    for key, value in LEAKS.items():
        monkeypatch.setenv(key, value)
    env = tansu_environment(None)
    assert set(env) == {"PATH"}
    assert not set(env.values()) & set(LEAKS.values())


def test_s3_broker_gets_the_emulators_fake_credentials_only(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for key, value in LEAKS.items():
        monkeypatch.setenv(key, value)
    env = tansu_environment("http://127.0.0.1:5000")
    for key, value in FAKE_CREDENTIALS.items():
        assert env[key] == value
    assert env["AWS_ENDPOINT"] == "http://127.0.0.1:5000"
    assert "AWS_PROFILE" not in env and "GITHUB_TOKEN" not in env
    assert not set(env.values()) & set(LEAKS.values())


@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="needs /proc")
def test_the_running_broker_has_none_of_the_callers_variables(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for key, value in LEAKS.items():
        monkeypatch.setenv(key, value)
    server = start_tansu()
    try:
        assert server.running
        seen = _environ(server.process.pid)
    finally:
        server.stop()
    assert seen == {"PATH": tansu_environment(None)["PATH"]}
