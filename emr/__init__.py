"""What the bundle knows of Amazon EMR itself, as plain data:
:mod:`emr.releases`, the release labels it deploys on, their Spark, Python and
Regions, and the one Spark the job is built for.

A package of its own, below both the CDK app (``infra``, which validates an
instance's release against it) and the build tools (``artifacts``, which
build the Python dependency archive for the release's interpreter), so that
both read one table and neither imports the other backwards. Not in
``model``: the model's modules ship in the job's ``app.zip``, which holds only
what the job imports (tests/deploy/test_app_package.py). Pure data and small
pure functions; imports nothing of the project (tests/test_architecture.py).
"""
