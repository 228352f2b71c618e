"""CDK integration tests of two throwaway instances (one serverless, one EMR),
built from a fixed configuration (``integ/config.json``, not the shipped
``cdk.json``): their templates are snapshotted and compared offline in CI
(``python -m integ.check``), and deployed, asserted, updated, stopped and
started, and destroyed with an account (``python -m integ.run``).
docs/integ.md says why the snapshot comparison is the project's own, next to
CDK's diff engine, rather than ``integ-runner``."""
