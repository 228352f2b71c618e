"""The configuration kit shared by the job's configuration (:mod:`model.config`)
and the instance configuration (:mod:`infra.config`, :mod:`infra.shared_config`).

Strict, frozen, closed pydantic models (:class:`ConfigModel`), list-as-tuple
fields (:data:`JsonTuple`), value rules that carry their human text
(:class:`Allowed`, :func:`bad_value`, :func:`at_least`), and the translation of pydantic's
errors into one line per bad field that names the field, its value and what
is allowed (:func:`problems`). Nothing here knows a field of the job or of an
instance: each configuration prefixes the lines its own way.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import NoneType, UnionType
from typing import Annotated, Any, Literal, TypeVar, Union, get_args, get_origin

from annotated_types import Ge, Gt, Le, Lt
from pydantic import BaseModel, BeforeValidator, ConfigDict, GetCoreSchemaHandler, ValidationError
from pydantic.fields import FieldInfo
from pydantic_core import ErrorDetails, PydanticCustomError, core_schema


class ConfigModel(BaseModel):
    """Frozen (hashable, safe to share), closed and strict: JSON gives the
    types, nothing is coerced, and an empty string is never a valid value."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True, str_min_length=1)


def _tuple_from_list(value: object) -> object:
    """JSON arrays arrive as lists; strict mode accepts only a tuple for a tuple
    field, and tuples keep the models hashable."""
    return tuple(value) if isinstance(value, list) else value


T = TypeVar("T")
JsonTuple = Annotated[tuple[T, ...], BeforeValidator(_tuple_from_list)]


def bad_value(value: object, allowed: str, *field: str | int) -> PydanticCustomError:
    """The error a rule raises. ``field`` is the path below the model that
    raises it, for a rule on several fields that blames one of them."""
    return PydanticCustomError(
        "bad_value",
        "bad value {value}; allowed: {allowed}",
        {"value": value, "allowed": allowed, "field": field},
    )


def at_least(field: str, value: int, floor: int, floor_text: str) -> None:
    """The rule "``field`` may not be below another setting": refuses ``value``
    below ``floor`` with :func:`bad_value` naming ``field``; ``floor_text`` says
    what the floor is and why (shown as ``>= <floor_text>``)."""
    if value < floor:
        raise bad_value(value, f">= {floor_text}", field)


@dataclass(frozen=True)
class Allowed:
    """``Annotated`` marker: a rule on a field's value plus the text an error
    shows as what is allowed (kept together so they cannot drift)."""

    test: Callable[[Any], bool]
    text: str

    def __get_pydantic_core_schema__(
        self, source: Any, handler: GetCoreSchemaHandler
    ) -> core_schema.CoreSchema:
        return core_schema.no_info_after_validator_function(self._check, handler(source))

    def _check(self, value: Any) -> Any:
        if not self.test(value):
            raise bad_value(value, self.text)
        return value


@dataclass(frozen=True)
class Problem:
    """One invalid field: its dotted path (``kafka.topic``, ``event_fields[1].name``;
    empty for the whole document) and what is wrong with it."""

    path: str
    text: str


def problems(error: ValidationError, model: type[BaseModel]) -> list[Problem]:
    """Each of pydantic's errors for ``model`` as a path plus ``bad value <v>;
    allowed: <...>``, ``missing required field`` or ``unknown field; allowed: <names>``.

    What is allowed comes from the field's declaration (its type, bounds,
    :class:`Allowed` rule and description), so the message and the check have
    one source.
    """
    return [_problem(details, model) for details in error.errors()]


def _problem(details: ErrorDetails, model: type[BaseModel]) -> Problem:
    ctx: dict[str, Any] = dict(details.get("ctx") or {})
    loc = (*details["loc"], *ctx.get("field", ()))
    path = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in loc).lstrip(".")
    kind = details["type"]
    if kind == "extra_forbidden":
        parent = _model_in(_target(model, loc[:-1])[0])
        names = ", ".join(sorted(parent.model_fields)) if parent else "none"
        return Problem(path, f"unknown field; allowed: {names}")
    annotation, metadata, note = _target(model, loc)
    if kind == "missing":
        what = _describe(annotation, metadata, note) if annotation is not None else ""
        return Problem(path, "missing required field" + (f"; allowed: {what}" if what else ""))
    if "allowed" in ctx:
        allowed = str(ctx["allowed"])
    elif annotation is None:
        allowed = details["msg"]
    elif kind in ("greater_than", "greater_than_equal", "less_than", "less_than_equal"):
        allowed = _describe(annotation, metadata, note, bounds_only=True)
    else:
        allowed = _describe(annotation, metadata, note)
    value = ctx.get("value", details["input"])
    return Problem(path, f"bad value {value!r}; allowed: {allowed}")


def _unwrap(annotation: Any) -> tuple[Any, bool, list[Any]]:
    """The type under ``Annotated``/``| None``: (type, nullable, metadata met)."""
    nullable, metadata = False, []
    while True:
        origin = get_origin(annotation)
        if origin is Annotated:
            annotation, *extra = get_args(annotation)
            metadata.extend(extra)
        elif origin in (Union, UnionType):
            members = [a for a in get_args(annotation) if a is not NoneType]
            nullable = nullable or len(members) < len(get_args(annotation))
            if len(members) != 1:
                return annotation, nullable, metadata
            annotation = members[0]
        else:
            return annotation, nullable, metadata


def _model_in(annotation: Any) -> type[BaseModel] | None:
    base = _unwrap(annotation)[0]
    return base if isinstance(base, type) and issubclass(base, BaseModel) else None


def _target(model: type[BaseModel], loc: Sequence[int | str]) -> tuple[Any, list[Any], str]:
    """What ``loc`` points at: (annotation, constraints, description); the
    annotation is None where pydantic's path leaves the declared fields."""
    annotation: Any = model
    metadata: list[Any] = []
    note = ""
    for part in loc:
        base, _, _ = _unwrap(annotation)
        parent = _model_in(base)
        if isinstance(part, int) and get_origin(base) is tuple:
            annotation, metadata, note = get_args(base)[0], [], ""
        elif isinstance(part, str) and parent is not None and part in parent.model_fields:
            info: FieldInfo = parent.model_fields[part]
            annotation, metadata = info.annotation, list(info.metadata)
            note = info.description or ""
        else:
            return None, [], ""
    return annotation, metadata, note


def _describe(annotation: Any, metadata: list[Any], note: str, *, bounds_only: bool = False) -> str:
    base, nullable, inner = _unwrap(annotation)
    marks = [*metadata, *inner]
    rule = next((m.text for m in marks if isinstance(m, Allowed)), None)
    if rule is not None and not bounds_only:
        return rule
    origin = get_origin(base)
    if origin is Literal:
        text = " | ".join(str(a) for a in get_args(base))
    elif origin is tuple:
        text = "a list"
    elif base is bool:
        text = "true or false"
    elif base is int:
        text = "an integer"
    elif base is float:
        text = "a number"
    elif base is str:
        text = "a non-empty string"
    elif _model_in(base) is not None:
        text = "an object"
    else:
        text = str(base)
    bounds = [
        f"{op} {getattr(m, attr)}"
        for m in marks
        for kind, attr, op in ((Ge, "ge", ">="), (Gt, "gt", ">"), (Le, "le", "<="), (Lt, "lt", "<"))
        if isinstance(m, kind)
    ]
    if bounds:
        text += " " + " and ".join(bounds)
    if nullable:
        text += ", or null"
    return f"{text} ({note})" if note else text
