"""Which version of an instance's job runs: a short digest of its configuration's URI.

Why: on EMR a deploy that changes the job replaces the stack's step, and a
step cannot be withdrawn once it has submitted the job. When that update fails
further on and CloudFormation rolls back, the stack's step is the old one again
while the new version's job runs on. The supervisor hands back to the stack's
version (``infra/supervisor/decision.py``), so it must tell which version runs:
the job records this digest in its lease (:mod:`model.lease`), and the
supervisor derives the same digest from the stack's step, whose arguments name
the same URI.

Why the configuration's URI: every job version (code, jar or configuration)
gets its own content-addressed prefix, ``artifacts/job/<hash>/job-config.json``
(``infra/constructs/job_deployment.py``), and the job is started with
``--config <that URI>``: the job knows it at start, the step carries it
verbatim. Settings outside the package (the step's launcher and spark-submit
options: the interpreter, the CBOR switch, the handover wait) do not move it.

Stdlib only: the supervisor's Lambda package carries this file.
"""

from __future__ import annotations

import hashlib
import itertools
from collections.abc import Sequence
from typing import Final

# The job's option naming its configuration (job/driver.py), as the step passes it.
CONFIG_OPTION: Final = "--config"
# 48 bits: two versions of one instance never share a digest in practice, and
# the lease body, the logs and make status stay readable.
DIGEST_CHARS: Final = 12


def version_of(config_uri: str) -> str:
    """The version of the job started with ``--config config_uri``."""
    return hashlib.sha256(config_uri.encode("utf-8")).hexdigest()[:DIGEST_CHARS]


def config_uri_in(args: Sequence[str]) -> str | None:
    """The value of the last ``--config`` of a command line (the job's
    arguments come last in a step), or None when there is none."""
    found: str | None = None
    for option, value in itertools.pairwise(args):
        if option == CONFIG_OPTION:
            found = value
    return found


def version_in(args: Sequence[str]) -> str | None:
    """The version a command line starts, or None when it names no configuration."""
    config_uri = config_uri_in(args)
    return None if config_uri is None else version_of(config_uri)
