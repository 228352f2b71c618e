"""What every preflight check returns, and the helpers they share to describe
a failed call (``python -m scripts.preflight`` runs the checks listed in
:mod:`scripts.preflight.checks`, one module each beside this one)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

# The boto3 clients of the checks, by service name (stubs in tests).
Clients = Mapping[str, Any]

ACCESS_DENIED_CODES: Final = frozenset({"AccessDenied", "AccessDeniedException"})


@dataclass(frozen=True)
class Result:
    """One check's outcome. ``warn``: passed, with a caveat the operator must
    check by hand (printed ``WARN``; it does not fail the run). ``fix`` is what
    to do on a fail, or what to check on a warning."""

    name: str
    ok: bool
    detail: str
    fix: str = ""
    warn: bool = False

    @property
    def status(self) -> str:
        if not self.ok:
            return "FAIL"
        return "WARN" if self.warn else "PASS"


def error_text(exc: Exception) -> str:
    """The first line of an exception, at most 300 characters."""
    return str(exc).splitlines()[0][:300] if str(exc) else type(exc).__name__


def error_code(exc: Exception) -> str:
    """A botocore ClientError's code (``AccessDeniedException``, ...); else ''."""
    response = getattr(exc, "response", None)
    if isinstance(response, Mapping):
        return str(response.get("Error", {}).get("Code", ""))
    return ""


def access_denied(exc: Exception) -> bool:
    """Whether a call failed because the credentials lack a permission."""
    return error_code(exc) in ACCESS_DENIED_CODES


def iam_fix(actions: str) -> str:
    return f"run with credentials allowed {actions}"
