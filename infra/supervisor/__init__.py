"""The supervisor, one component: a scheduled Lambda that restarts an
instance's job when it is down, within a restart budget (docs/operate.md,
"The supervisor").

* :mod:`infra.supervisor.construct`: the construct (function, schedule, IAM,
  alarms);
* its Lambda's code, beside it: :mod:`~infra.supervisor.decision` (the pure
  decision), :mod:`~infra.supervisor.handler` (the EMR target),
  :mod:`~infra.supervisor.serverless` (the EMR Serverless target),
  :mod:`~infra.supervisor.metrics`;
* :mod:`infra.supervisor.status`: what ``make status`` shows of it.

As the AWS CDK project-structure sample
(aws-samples/aws-cdk-project-structure-python) keeps a component's
``infrastructure.py`` beside its ``runtime/``, with two differences:

* The Lambda's modules stay at this package's top, not in a ``runtime/``
  folder: the function's ``Handler`` (``infra.supervisor.handler.handler``,
  ``infra.supervisor.serverless.handler``) is their import path, written in
  every deployed template, and :data:`artifacts.packaging.SUPERVISOR_FILES`
  stages exactly those modules (never the construct, which imports the CDK).
  This file is staged too: it imports nothing.
* The local adapters live in :mod:`local.supervisor` (``emr.py``: the
  local harness plays EMR; ``serverless.py``: the patched EMR Serverless on
  this machine). They run the harness (:mod:`local.harness`, the emulators),
  and ``infra`` never imports ``local`` (tests/test_architecture.py): the CDK
  app and the Lambda must not carry the harness.
"""
