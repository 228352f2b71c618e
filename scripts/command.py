"""What every operator command shares: how it fails, and which instance it is about.

A command stops with an :class:`OperatorError`: one line naming what is wrong
and the exit code (2 for usage: a bad flag, an undeclared instance; 5 for an
AWS call that failed), and :func:`run_command` turns it, and any AWS error,
into one line on stderr and the exit code. :func:`declared_instance` finds
``--instance`` in ``cdk.json`` the same way for every command, so each names
the declared instances when the one asked for is not among them.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Final

from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    ConnectTimeoutError,
    EndpointConnectionError,
)

from infra import config as infra_config
from infra.config import InstanceConfig

EXIT_USAGE: Final = 2
EXIT_AWS: Final = 5
DEFAULT_CDK_JSON: Final = Path("cdk.json")


class OperatorError(Exception):
    """What stops an operator command: ``code`` is its exit code, the message one line."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


def first_line(exc: BaseException) -> str:
    """The first line of an exception's message (its type when it has none)."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def declared_instance(instance: str, cdk_json: Path = DEFAULT_CDK_JSON) -> InstanceConfig:
    """The instance as ``cdk.json`` declares it; an unknown one names the declared ones."""
    try:
        return infra_config.declared_instance(cdk_json, instance)
    except infra_config.UndeclaredInstanceError as exc:
        raise OperatorError(EXIT_USAGE, f"--instance {exc}") from exc
    except (OSError, ValueError) as exc:  # InstanceConfigError is a ValueError
        raise OperatorError(EXIT_USAGE, f"{cdk_json}: {first_line(exc)}") from exc


def endpoint_problem(exc: BaseException) -> str | None:
    """The one-line message for an endpoint that cannot be reached, else None."""
    if isinstance(exc, EndpointConnectionError | ConnectTimeoutError):
        url = exc.kwargs.get("endpoint_url", "?")
        return (
            f"endpoint {url} unreachable ({type(exc).__name__}); a local run's emulators "
            "live only while its make run runs"
        )
    return None


def run_command(name: str, action: Callable[[], int]) -> int:
    """Run an operator command; every expected failure becomes one line and an exit code."""
    try:
        return action()
    except OperatorError as exc:
        print(f"{name}: {exc}", file=sys.stderr)
        return exc.code
    except (BotoCoreError, ClientError) as exc:
        problem = endpoint_problem(exc)
        if problem is not None:
            print(f"{name}: {problem}", file=sys.stderr)
            return EXIT_USAGE
        print(f"{name}: AWS call failed: {str(exc).splitlines()[0]}", file=sys.stderr)
        return EXIT_AWS
