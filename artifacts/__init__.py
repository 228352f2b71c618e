"""The build tools: what a deploy ships, built from the repository, offline,
the same sources always giving the same bytes.

* :mod:`artifacts.job_jar`: the job's JVM jar, compiled against the pinned
  pyspark wheel's jars (``python -m artifacts.job_jar``);
* :mod:`artifacts.serverless_archive`: the job's Python dependencies for EMR
  Serverless, one archive per platform (``python -m
  artifacts.serverless_archive``);
* :mod:`artifacts.packaging`: ``app.zip``, the staged job package and
  bootstrap directories, and the Lambda handlers' staged code, by content hash.

Named ``artifacts`` for what it makes: the files the stacks upload under the
artifacts bucket's ``artifacts/`` prefix and the Lambda assets. A package of
its own, not part of ``infra``, because building the jar needs pyspark (its
jars are the compile classpath): no module of the CDK app imports pyspark,
not even inside a function, so a synth-only environment runs ``infra`` as
it is (tests/test_architecture.py holds both). Dependencies point one way:
``infra`` imports this package, and this package imports only the model
(:mod:`model.jvm`) and the release facts (:mod:`emr.releases`), never
``infra``. No CDK here either: tests and tools build and inspect exactly what
a deploy ships without synthesizing a stack.
"""
