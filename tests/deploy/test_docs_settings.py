"""The settings and commands the documents name are the code's: a make target
the Makefile lacks, a ``section.field`` no model declares, or a default in
docs/infra.md's field table that the model does not apply fails here, read
from the Makefile and the pydantic models rather than restated."""

from __future__ import annotations

import importlib
import importlib.util
import json
import re
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from infra.config import InstanceConfig
from model.config import FieldType, JobConfig

REPO = Path(__file__).resolve().parents[2]
DOCS = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]
# The field tables: a document, its table's header row, the model it describes.
FIELD_TABLES = {
    "infra.md": ("| field | default | allowed |", InstanceConfig),
    "job.md": ("| field | default | what |", JobConfig),
}
# Dotted names in backticks that are not settings: files, MSK broker types
# (``kafka.m5.large``) and Kafka's own topic configuration.
NOT_A_SETTING = re.compile(r"\.(py|md|json|log)$|^kafka\.[a-z]\d|^retention\.ms$")


def _texts() -> Iterator[tuple[str, str]]:
    for path in DOCS:
        yield str(path.relative_to(REPO)), path.read_text(encoding="utf-8")


def _model_of(annotation: Any) -> type[BaseModel] | None:
    """The model a field holds (``X``, ``X | None``), or None for a plain value."""
    for arg in (annotation, *typing.get_args(annotation)):
        if isinstance(arg, type) and issubclass(arg, BaseModel):
            return arg
    return None


def _field(model: type[BaseModel], path: str) -> FieldInfo | None:
    """The field ``path`` names under ``model``; None when there is none. A path
    that goes on past a plain value (a mapping) is the value's."""
    info: FieldInfo | None = None
    current: type[BaseModel] | None = model
    for part in path.split("."):
        if current is None:
            return info
        info = current.model_fields.get(part)
        if info is None:
            return None
        current = _model_of(info.annotation)
    return info


def _names_code(name: str) -> bool:
    """``job.query.run``, ``local.table``: a module or a module's attribute."""
    try:
        if importlib.util.find_spec(name) is not None:
            return True
    except (ImportError, ValueError):
        pass
    parent, _, attr = name.rpartition(".")
    try:
        return hasattr(importlib.import_module(parent), attr)
    except ImportError:
        return False


def test_every_make_target_the_documents_name_is_in_the_makefile() -> None:
    makefile = (REPO / "Makefile").read_text(encoding="utf-8")
    targets = set(re.findall(r"^([a-z][a-z0-9-]*):", makefile, re.MULTILINE))
    assert {"run", "test", "stop-job", "start-job"} <= targets
    named = {
        (doc, target)
        for doc, text in _texts()
        for target in re.findall(r"`[^`]*?\bmake ([a-z][a-z0-9-]*)", text)
        + re.findall(r"^\s*make ([a-z][a-z0-9-]*)", text, re.MULTILINE)
    }
    assert len(named) > 20
    assert sorted((doc, t) for doc, t in named if t not in targets) == []


def test_every_setting_the_documents_name_is_declared() -> None:
    """``kafka.shared``, ``job.source.consumer_type``: a field of the instance's
    model (``cdk.json``) or of the job's config file (``JobConfig``)."""
    sections = {
        name for name, info in InstanceConfig.model_fields.items() if _model_of(info.annotation)
    }
    assert {"kafka", "network", "job", "emr"} <= sections
    checked: set[str] = set()
    unknown: set[tuple[str, str]] = set()
    for doc, text in _texts():
        for name in re.findall(r"`([a-z_]+(?:\.[a-z_0-9]+)+)`", text):
            if name.split(".")[0] not in sections or NOT_A_SETTING.search(name):
                continue
            if _field(InstanceConfig, name) or _field(JobConfig, name):
                checked.add(name)
            elif not _names_code(name):
                unknown.add((doc, name))
    assert {"kafka.shared", "network.shared", "emr.tls_certificates_s3_uri"} <= checked
    assert sorted(unknown) == []


def _documented_defaults(doc: str) -> Iterator[tuple[str, str]]:
    """(field, the default the table states) for every row of ``doc``'s field
    table; ``a.b_type`` / ``_count`` / ``c`` name ``a.b_count`` and ``a.c``."""
    text = (REPO / "docs" / doc).read_text(encoding="utf-8")
    start = text.index(FIELD_TABLES[doc][0])
    rows = text[start:].split("\n\n", 1)[0].splitlines()[2:]
    for row in rows:
        cells = [cell.strip() for cell in row.strip().strip("|").split(" | ")]
        if "*" in cells[0]:  # a whole section (``table_maintenance.*``), told below
            continue
        names = [name.strip().strip("`") for name in re.split(r" / |, ", cells[0])]
        first = names[0]
        parent = first.rpartition(".")[0]
        full = [first]
        for name in names[1:]:
            if name.startswith("_"):
                full.append(re.sub(r"_[a-z]+$", name, first))
            elif "." in name or not parent:
                full.append(name)
            else:
                full.append(f"{parent}.{name}")
        defaults = [d.strip() for d in cells[1].split(" / ")]
        if len(defaults) != len(full):  # a default told in words (job.event_fields)
            defaults = [cells[1]] * len(full)
        yield from zip(full, defaults, strict=True)


def _stated(default: str) -> object:
    """``null`` (or ``none``) -> None, ``24`` -> 24, `` `RETAIN` `` -> "RETAIN";
    ``null` (4)``: the value before the explanation in parentheses."""
    token = re.sub(r"\s*\(.*\)$", "", default).strip("`")
    if token == "none":
        return None
    try:
        return json.loads(token)
    except ValueError:
        return token


def _applied(info: FieldInfo) -> object:
    if info.default_factory is not None:
        value = info.default_factory()
    elif info.default is PydanticUndefined:
        return "required"
    else:
        value = info.default
    return list(value) if isinstance(value, tuple) else value


@pytest.mark.parametrize(
    ("doc", "expected"),
    [
        ("infra.md", {"kafka.shared", "emr.master_instance_count", "job.trigger_interval_sec"}),
        ("job.md", {"lease_ttl_sec", "kafka.request_timeout_ms", "source.consumer_arn"}),
    ],
)
def test_the_field_table_states_the_defaults_the_models_apply(doc: str, expected: set[str]) -> None:
    model = FIELD_TABLES[doc][1]
    compared: list[str] = []
    wrong: list[str] = []
    missing: list[str] = []
    for name, default in _documented_defaults(doc):
        info = _field(model, name)
        if info is None:
            missing.append(name)
            continue
        applied = _applied(info)
        if isinstance(applied, BaseModel) or (
            isinstance(applied, list) and applied and isinstance(applied[0], BaseModel)
        ):
            continue  # a default of several fields, told in words
        compared.append(name)
        if _stated(default) != applied:
            wrong.append(f"{name}: documented {default}, applied {applied!r}")
    assert missing == []
    assert len(compared) >= 30
    assert expected <= set(compared)
    assert wrong == []


def test_the_documents_list_every_event_field_type() -> None:
    """docs/infra.md's field table and docs/job.md name each type a field may
    declare (``model.config.FieldType``), no more."""
    types = set(typing.get_args(FieldType))
    assert {"int", "float", "timestamp"} <= types
    infra = (REPO / "docs" / "infra.md").read_text(encoding="utf-8")
    row = next(line for line in infra.splitlines() if line.startswith("| `job.event_fields` |"))
    listed = re.search(r"`type` one of ((?:`\w+` \\\| )*`\w+`)", row)
    assert listed is not None
    assert set(re.findall(r"`(\w+)`", listed[1])) == types
    job = " ".join((REPO / "docs" / "job.md").read_text(encoding="utf-8").split())
    sentence = re.search(r"with distinct names; types: (.*?)\. ", job)
    assert sentence is not None
    assert set(re.findall(r"`(\w+)`", sentence[1])) == types
