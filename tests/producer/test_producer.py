"""producer/producer.py's command line: the count and rate options ``python -m
producer.producer`` and ``python -m local`` (``make run``) share, each with its own
rate default. The producer's runs are in tests/e2e/test_local_tools.py."""

from __future__ import annotations

import argparse

import pytest

from local.__main__ import parse_args as run_args
from producer.producer import add_count_and_rate_arguments
from producer.producer import parse_args as producer_args


def test_count_and_rate_take_their_defaults_and_refuse_negatives() -> None:
    parser = argparse.ArgumentParser()
    add_count_and_rate_arguments(parser, rate=250.0, each=" per instance")
    args = parser.parse_args([])
    assert (args.count, args.rate) == (5000, 250.0)
    assert parser.parse_args(["--count", "0", "--rate", "0"]).rate == 0.0
    help_text = " ".join(parser.format_help().split())
    assert "records to put per instance (default 5000)" in help_text
    assert "max records per second per instance (default 250; 0: unthrottled)" in help_text
    for bad in (["--count", "-1"], ["--rate", "-0.5"]):
        with pytest.raises(SystemExit):
            parser.parse_args(bad)


def test_the_producer_is_unthrottled_and_make_run_paced_by_default() -> None:
    producer = producer_args(["--stream", "s", "--region", "eu-west-1"])
    run = run_args([])
    assert (producer.count, producer.rate) == (5000, 0.0)
    assert (run.count, run.rate) == (5000, 1000.0)
