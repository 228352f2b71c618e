"""Is the instance's EMR release label offered in its region (``ListReleaseLabels``)?"""

from __future__ import annotations

from infra.config import InstanceConfig
from scripts.preflight.result import Clients, Result, error_text, iam_fix


def check_release_label(config: InstanceConfig, clients: Clients) -> Result:
    name = "EMR release label"
    label = config.emr.release_label
    try:
        found = clients["emr"].list_release_labels(Filters={"Prefix": label}, MaxResults=50)
    except Exception as exc:
        return Result(
            name,
            False,
            f"ListReleaseLabels failed: {error_text(exc)}",
            iam_fix("emr:ListReleaseLabels"),
        )
    labels = found.get("ReleaseLabels", [])
    if label in labels:
        return Result(name, True, f"{label} is available in {config.region}")
    return Result(
        name,
        False,
        f"{label} is not offered in {config.region} (found: {', '.join(labels) or 'none'})",
        "choose a region that offers it, or a supported label in infra/releases.py",
    )
