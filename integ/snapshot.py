"""The committed snapshot of a synthesized integration app: each instance
stack's template, asset hashes replaced by their order in the stack's asset
manifest (``Asset1``...), as ``integ-runner`` compares them without
``diffAssets``; the assets themselves are not kept (the job's dependency
archive alone is ~22 MB). A job code change thus leaves the snapshot as it
is; a change of a resource's properties or logical ID does not.

Beside the templates, ``updates.json`` records every accepted update: why,
the destructive changes it accepted, and the digest of the templates it
wrote, so that a snapshot edited by hand (without a reason) fails the check."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

SNAPSHOT_DIR: Final = Path(__file__).with_name("snapshots")
UPDATES_FILE: Final = "updates.json"
TEMPLATE_SUFFIX: Final = ".template.json"
# The stacks compared: the instances. The assertion stacks carry the synth
# time and nothing that holds state.
SNAPSHOT_PREFIX: Final = "Streaming-"
STAGED: Final = re.compile(r"[a-z][a-z-]*-([0-9a-f]{16})")
# The job run's request name ends in a digest of the request, which holds the
# job's version (infra/serverless/app.py): a job code change alone
# must leave the snapshot as it is.
REQUEST_NAME: Final = re.compile(r"(streaming-[a-z0-9-]+?)-[0-9a-f]{12}(?![0-9a-f])")


@dataclass(frozen=True)
class Update:
    """One accepted snapshot update."""

    reason: str
    destructive: tuple[str, ...]
    digest: str

    def to_dict(self) -> dict[str, Any]:
        return {"reason": self.reason, "destructive": list(self.destructive), "digest": self.digest}


def asset_ids(assets_manifest: Mapping[str, Any]) -> list[str]:
    """The asset hashes of one stack's ``*.assets.json``, in manifest order
    (construct order: stable while the hashes change)."""
    ids: list[str] = []
    for section in ("files", "dockerImages"):
        ids.extend(key for key in assets_manifest.get(section, {}) if key not in ids)
    return ids


def staged_versions(names: list[str]) -> list[str]:
    """The content hashes the project names its staged job files by
    (``job-package-<16 hex>`` directories in the assembly: the job's code and
    config version, which the step's name and URIs carry)."""
    return [m.group(1) for name in names if (m := STAGED.fullmatch(name))]


def normalise(template_text: str, ids: list[str], versions: Sequence[str] = ()) -> str:
    """``template_text`` with each asset hash replaced by ``Asset<n>`` and each
    staged version that occurs by ``Version<n>`` (numbered by first
    occurrence), the job run's request digest by ``RequestDigest``,
    re-serialised with sorted keys (one byte-stable form)."""
    text = template_text
    for index, asset in enumerate(ids, start=1):
        text = text.replace(asset, f"Asset{index}")
    present = sorted((text.index(v), v) for v in set(versions) if v in text)
    for index, (_, version) in enumerate(present, start=1):
        text = text.replace(version, f"Version{index}")
    text = REQUEST_NAME.sub(r"\1-RequestDigest", text)
    return json.dumps(json.loads(text), indent=1, sort_keys=True) + "\n"


def digest(templates: Mapping[str, str]) -> str:
    """One SHA-256 over the normalised templates, by stack name."""
    sha = hashlib.sha256()
    for name in sorted(templates):
        sha.update(name.encode() + b"\0" + templates[name].encode() + b"\0")
    return sha.hexdigest()


def from_assembly(assembly_dir: Path) -> dict[str, str]:
    """Stack name -> normalised template, for the instance stacks of a cloud
    assembly directory."""
    found: dict[str, str] = {}
    versions = staged_versions(sorted(path.name for path in assembly_dir.iterdir()))
    for template in sorted(assembly_dir.glob(f"{SNAPSHOT_PREFIX}*{TEMPLATE_SUFFIX}")):
        name = template.name.removesuffix(TEMPLATE_SUFFIX)
        assets = assembly_dir / f"{name}.assets.json"
        ids = asset_ids(json.loads(assets.read_text(encoding="utf-8"))) if assets.exists() else []
        found[name] = normalise(template.read_text(encoding="utf-8"), ids, versions)
    return found


def read(snapshot_dir: Path = SNAPSHOT_DIR) -> dict[str, str]:
    """The committed templates, by stack name."""
    return {
        path.name.removesuffix(TEMPLATE_SUFFIX): path.read_text(encoding="utf-8")
        for path in sorted(snapshot_dir.glob(f"*{TEMPLATE_SUFFIX}"))
    }


def updates(snapshot_dir: Path = SNAPSHOT_DIR) -> list[Update]:
    path = snapshot_dir / UPDATES_FILE
    if not path.exists():
        return []
    return [
        Update(item["reason"], tuple(item["destructive"]), item["digest"])
        for item in json.loads(path.read_text(encoding="utf-8"))
    ]


def unexplained(snapshot_dir: Path = SNAPSHOT_DIR) -> str | None:
    """Why the committed snapshot is not an accepted update, or None: its
    digest must be the last recorded update's, and every update has a reason."""
    recorded = updates(snapshot_dir)
    if not recorded:
        return f"{snapshot_dir / UPDATES_FILE}: no recorded update; run make integ-snapshot"
    silent = [index for index, update in enumerate(recorded) if not update.reason.strip()]
    if silent:
        return f"{snapshot_dir / UPDATES_FILE}: update {silent[0] + 1} has no reason"
    if recorded[-1].digest != digest(read(snapshot_dir)):
        return (
            f"{snapshot_dir}: the templates are not those of the last recorded update "
            "(edited by hand?); run make integ-snapshot REASON=..."
        )
    return None


def write(templates: Mapping[str, str], update: Update, snapshot_dir: Path = SNAPSHOT_DIR) -> None:
    """Replace the committed templates and record ``update``."""
    snapshot_dir.mkdir(parents=True, exist_ok=True)
    for old in snapshot_dir.glob(f"*{TEMPLATE_SUFFIX}"):
        old.unlink()
    for name, text in templates.items():
        (snapshot_dir / f"{name}{TEMPLATE_SUFFIX}").write_text(text, encoding="utf-8")
    recorded = [item.to_dict() for item in updates(snapshot_dir)] + [update.to_dict()]
    path = snapshot_dir / UPDATES_FILE
    path.write_text(json.dumps(recorded, indent=2) + "\n", encoding="utf-8")
