"""A copy of ``cdk.json`` in which one instance declares one more event field.

What a user does by hand before ``cdk deploy`` when a producer ships a new
field: append it to the instance's ``job.event_fields`` as an optional field.
The copy spells out what the edit implies, so that synth accepts it as the
additive change it is (:mod:`infra.schema_change`):

* an instance that declared no fields had the default ones: they are written
  out, then the new one is appended; its table's seed stays the default schema;
* an instance that pins its own table definition (``table_definition_sha256``)
  and has no ``table_seed`` yet gets one: the fields its table was created with.

Used by ``python -m local --declare`` (the local redeploy of a new schema) and
by the end-to-end test of it; never writes the repository's ``cdk.json``.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from model import contract
from model.config import DEFAULT_EVENT_FIELDS, JobSettings

_SCHEMA_KEYS = ("event_fields", "id_field", "event_time_field")


def _entry(raw: dict[str, Any], instance_id: str) -> dict[str, Any]:
    entries: list[dict[str, Any]] = raw["context"]["streaming"]["instances"]
    for entry in entries:
        if contract.instance_id(entry.get("domain", ""), entry.get("region", "")) == instance_id:
            return entry
    declared = ", ".join(contract.instance_id(e["domain"], e["region"]) for e in entries)
    raise ValueError(f"instance {instance_id!r}: not in the cdk.json (declared: {declared})")


def declare_field(raw: dict[str, Any], instance_id: str, field: dict[str, Any]) -> dict[str, Any]:
    """``raw`` (a parsed ``cdk.json``) with ``field`` appended to the instance's
    ``job.event_fields``; ``raw`` itself is not changed."""
    out = copy.deepcopy(raw)
    entry = _entry(out, instance_id)
    job = entry.setdefault("job", {})
    defaults = JobSettings()
    current: list[dict[str, Any]] = job.get("event_fields") or [
        f.model_dump() for f in DEFAULT_EVENT_FIELDS
    ]
    if any(f["name"] == field["name"] for f in current):
        raise ValueError(f"instance {instance_id}: field {field['name']!r} is declared already")
    if entry.get("table_definition_sha256") and "table_seed" not in entry:
        entry["table_seed"] = {
            "event_fields": copy.deepcopy(current),
            "id_field": job.get("id_field", defaults.id_field),
            "event_time_field": job.get("event_time_field", defaults.event_time_field),
        }
    job["event_fields"] = [*current, field]
    return out


def write_declared_copy(cdk_json: Path, out: Path, instance_id: str, field: dict[str, Any]) -> Path:
    """Write the copy to ``out``; returns it."""
    raw = json.loads(cdk_json.read_text(encoding="utf-8"))
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(declare_field(raw, instance_id, field), indent=2) + "\n")
    return out
