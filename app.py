#!/usr/bin/env python3
"""CDK entry point (``cdk.json``: ``python3 app.py``): one stack per instance
declared under the ``streaming`` context key. Configuration is read and
validated once, here, before any construct exists. After synthesis, one line
per instance on stderr says what it costs a month (infra/cost.py; stdout
stays the CLI's, so ``cdk synth --quiet`` prints nothing else)."""

import sys

from infra.cost import synth_line
from infra.stacks.application import build_app

if __name__ == "__main__":
    app, stacks = build_app()
    assembly = app.synth()
    for stack in stacks:
        template = assembly.get_stack_by_name(stack.stack_name).template
        print(synth_line(stack.config, stack.stack_name, template), file=sys.stderr)
