"""The synth of :mod:`bench.scale`, run in a fresh Python process per synth.

``python -c "from bench.synth_child import main; main()" <instances> <outdir>``
builds and synthesizes the CDK app with :func:`synth_context` and prints its
own split as JSON: import, build and synth seconds. What ``cdk synth`` runs
(``python3 app.py``), without the CLI.

The CDK app is imported through :func:`importlib.import_module` once the clock
runs, not at the top of this module: its import time is one of the figures.
This module imports nothing else from the project, so the child process loads
no Spark before it starts the clock (``bench.scale`` itself imports the job).
"""

from __future__ import annotations

import importlib
import json
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import Any, Final

REPO: Final = Path(__file__).resolve().parents[1]
SYNTH_REGION: Final = "eu-west-1"
COMMAND: Final = "from bench.synth_child import main; main()"


def synth_context(config: ModuleType, instances: int) -> dict[str, Any]:
    """cdk.json's context with ``instances`` generated instances on its defaults
    (``config`` is :mod:`infra.config`)."""
    context = dict(config.read_cdk_context(REPO / "cdk.json"))
    declared = context[config.CONTEXT_KEY]
    # Each its own TLS zip: synth refuses one zip for two instances.
    context[config.CONTEXT_KEY] = {
        "defaults": declared.get("defaults", {}),
        "instances": [
            {
                "domain": f"scale{i}",
                "region": SYNTH_REGION,
                "emr": {
                    "tls_certificates_s3_uri": config.placeholder_tls_uri(
                        f"scale{i}-{SYNTH_REGION}"
                    )
                },
            }
            for i in range(instances)
        ],
    }
    # The example's TLS zip is a placeholder; a synth meant as a check says so.
    context[config.SYNTH_CHECK_CONTEXT_KEY] = True
    return context


def main() -> None:
    """Child process: ``<instances> <outdir>``; prints its own split as JSON."""
    started = time.perf_counter()
    application = importlib.import_module("infra.stacks.application")
    imported = time.perf_counter()
    instances, outdir = int(sys.argv[1]), sys.argv[2]
    context = synth_context(importlib.import_module("infra.config"), instances)
    app, stacks = application.build_app(context, outdir=outdir)
    built = time.perf_counter()
    app.synth()
    done = time.perf_counter()
    templates = sorted(p.name for p in Path(outdir).glob("*.template.json"))
    if len(templates) != len(stacks) or len(stacks) != instances:
        raise SystemExit(f"{instances} instances gave {len(stacks)} stacks, {templates}")
    print(
        json.dumps(
            {
                "import_seconds": round(imported - started, 3),
                "build_seconds": round(built - imported, 3),
                "synth_seconds": round(done - built, 3),
                "stacks": len(stacks),
            }
        )
    )
