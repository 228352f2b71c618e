"""The configuration kit: strict, frozen, closed models, and pydantic's errors
turned into one line per bad field naming the field, its value and what is
allowed, read from the field's own declaration."""

from __future__ import annotations

from typing import Annotated, Literal

import pytest
from pydantic import Field, ValidationError, model_validator

from model.config_kit import Allowed, ConfigModel, JsonTuple, Problem, at_least, problems

EVEN = Allowed(lambda n: n % 2 == 0, "an even integer")


class Inner(ConfigModel):
    name: str
    size: Annotated[int, Field(ge=1, le=8)] = 1


class Outer(ConfigModel):
    mode: Literal["fast", "safe"] = "safe"
    pairs: Annotated[int, EVEN] = 2
    items: JsonTuple[Inner] = ()
    retries: Annotated[int, Field(description="how often a batch is retried")] = 0
    floor: int = 0
    limit: float | None = None

    @model_validator(mode="after")
    def _floor_below_retries(self) -> Outer:
        at_least("retries", self.retries, self.floor, "floor (the least retries allowed)")
        return self


def _problems(document: object) -> list[Problem]:
    with pytest.raises(ValidationError) as caught:
        Outer.model_validate(document)
    return problems(caught.value, Outer)


def test_a_json_list_becomes_a_tuple_and_the_model_stays_hashable() -> None:
    config = Outer.model_validate({"items": [{"name": "a"}, {"name": "b", "size": 3}]})
    assert config.items == (Inner(name="a"), Inner(name="b", size=3))
    assert hash(config) == hash(Outer.model_validate(config.model_dump()))


def test_nothing_is_coerced_and_an_empty_string_is_refused() -> None:
    assert _problems({"pairs": "4"}) == [
        Problem("pairs", "bad value '4'; allowed: an even integer")
    ]
    assert _problems({"items": [{"name": ""}]}) == [
        Problem("items[0].name", "bad value ''; allowed: a non-empty string")
    ]


def test_a_rule_shows_its_own_text_and_bounds_show_as_bounds() -> None:
    assert _problems({"pairs": 3}) == [Problem("pairs", "bad value 3; allowed: an even integer")]
    assert _problems({"items": [{"name": "a", "size": 9}]}) == [
        Problem("items[0].size", "bad value 9; allowed: an integer >= 1 and <= 8")
    ]


def test_a_literal_a_nullable_number_and_a_described_field() -> None:
    assert _problems({"mode": "slow"}) == [
        Problem("mode", "bad value 'slow'; allowed: fast | safe")
    ]
    assert _problems({"limit": "x"}) == [
        Problem("limit", "bad value 'x'; allowed: a number, or null")
    ]
    assert _problems({"retries": "x"}) == [
        Problem("retries", "bad value 'x'; allowed: an integer (how often a batch is retried)")
    ]


def test_unknown_and_missing_fields_name_what_is_allowed() -> None:
    assert _problems({"colour": "red"}) == [
        Problem("colour", "unknown field; allowed: floor, items, limit, mode, pairs, retries")
    ]
    assert _problems({"items": [{}]}) == [
        Problem("items[0].name", "missing required field; allowed: a non-empty string")
    ]


def test_a_rule_over_two_fields_blames_the_one_it_names() -> None:
    assert _problems({"floor": 3, "retries": 1}) == [
        Problem("retries", "bad value 1; allowed: >= floor (the least retries allowed)")
    ]
