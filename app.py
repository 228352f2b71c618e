#!/usr/bin/env python3
"""CDK entry point (``cdk.json``: ``python3 app.py``): one stack per instance
declared under the ``streaming`` context key, and one per region's shared
stack. Configuration is read and validated once, here, before any construct
exists. After synthesis, one line per stack on stderr says what it costs a
month (infra/cost/estimate.py; stdout stays the CLI's, so ``cdk synth --quiet`` prints
nothing else). Invalid configuration prints its problems, one line each, and
exits non-zero without a traceback."""

import sys

from infra.config import InstanceConfigError
from infra.cost.estimate import NO_LOAD, synth_line, synth_line_at
from infra.stacks.application import build_app
from infra.stacks.shared_stack import SharedRegionStack

# The CLI reports an app that exits non-zero ("subprocess exited with error 1")
# after what the app printed: the problems, one line each, and no traceback.
CONFIG_ERROR_EXIT = 1

if __name__ == "__main__":
    try:
        app, stacks = build_app()
    except InstanceConfigError as exc:
        print(f"cdk.json: {exc}".replace("\n", "\ncdk.json: "), file=sys.stderr)
        sys.exit(CONFIG_ERROR_EXIT)
    assembly = app.synth()
    for stack in stacks:
        template = assembly.get_stack_by_name(stack.stack_name).template
        print(synth_line(stack.config, stack.stack_name, template), file=sys.stderr)
    for shared in [c for c in app.node.children if isinstance(c, SharedRegionStack)]:
        template = assembly.get_stack_by_name(shared.stack_name).template
        line = synth_line_at(shared.stack_name, shared.region, NO_LOAD, template)
        print(line, file=sys.stderr)
