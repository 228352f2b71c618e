"""Argument types every operator command shares: numbers checked when the
command line is parsed, so a bad value stops the command before it changes
anything (argparse prints ``argument --NAME: ...`` and exits 2).

Used as ``type=`` of ``add_argument`` in :mod:`scripts`, :mod:`producer` and :mod:`local`
(``make stop-job``, ``make redeploy``, ``make produce``, ``make reprocess``,
``make migrate-checkpoint``, ``make status``, ``make certs``,
``python -m producer.producer``, ``make run``).
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable


def _number(text: str, kind: type[float] | type[int]) -> float:
    try:
        value = kind(text)
    except ValueError:
        what = "an integer" if kind is int else "a number"
        raise argparse.ArgumentTypeError(f"{text!r}: not {what}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"{text!r}: not a finite number")
    return value


def _bounded(text: str, kind: type[float] | type[int], low: float, allowed: str) -> float:
    """``text`` as ``kind``, refused below ``low`` with ``allowed`` as the rule."""
    value = _number(text, kind)
    if value < low:
        raise argparse.ArgumentTypeError(f"{text}: allowed: {allowed}")
    return value


def non_negative_float(text: str) -> float:
    """Seconds, a rate: 0 or more."""
    return float(_bounded(text, float, 0, ">= 0"))


def positive_float(text: str) -> float:
    """An interval: more than 0."""
    value = float(_number(text, float))
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text}: allowed: > 0")
    return value


def non_negative_int(text: str) -> int:
    return int(_bounded(text, int, 0, ">= 0"))


def positive_int(text: str) -> int:
    return int(_bounded(text, int, 1, ">= 1"))


def share(text: str) -> float:
    """A share of records: 0 to 1."""
    value = float(_number(text, float))
    if not 0 <= value <= 1:
        raise argparse.ArgumentTypeError(f"{text}: allowed: 0..1")
    return value


def int_between(low: int, high: int) -> Callable[[str], int]:
    """An integer in ``low..high``."""

    def check(text: str) -> int:
        value = int(_number(text, int))
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"{text}: allowed: {low}..{high}")
        return value

    check.__name__ = f"int {low}..{high}"
    return check
