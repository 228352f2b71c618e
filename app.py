#!/usr/bin/env python3
"""CDK entry point (``cdk.json``: ``python3 app.py``): one stack per instance
declared under the ``streaming`` context key. Configuration is read and
validated once, here, before any construct exists."""

from infra.stacks.application import build_app

if __name__ == "__main__":
    app, _stacks = build_app()
    app.synth()
