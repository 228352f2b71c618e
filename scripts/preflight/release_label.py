"""Is the instance's EMR release label offered in its region (``ListReleaseLabels``)?"""

from __future__ import annotations

from infra.config import InstanceConfig
from scripts.preflight.result import Clients, Result, error_text, iam_fix


def check_release_label(config: InstanceConfig, clients: Clients) -> Result:
    label = config.emr.release_label
    return release_label_result(
        config,
        clients,
        name="EMR release label",
        offered=f"{label} is available in {config.region}",
    )


def release_label_result(
    config: InstanceConfig, clients: Clients, *, name: str, offered: str
) -> Result:
    """Check ``name``: ``emr.release_label`` among the region's labels; ``offered``
    is the message when it is (the EMR and the EMR Serverless checks share this)."""
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
        return Result(name, True, offered)
    return Result(
        name,
        False,
        f"{label} is not offered in {config.region} (found: {', '.join(labels) or 'none'})",
        "choose a region that offers it, or a supported label in emr/releases.py",
    )
