"""The EMR Serverless target, one component: an instance whose ``compute`` is
``"serverless"`` runs its job as a STREAMING job run on an EMR Serverless
application of its own (docs/serverless.md).

* :mod:`infra.serverless.config`: the ``compute`` choice and the
  ``serverless`` section of an instance's config;
* :mod:`infra.serverless.job_run`: the ``StartJobRun`` request and the
  application's ``spark-defaults``, one builder for the stack, the supervisor
  and the local launcher;
* :mod:`infra.serverless.app`: the construct (application, execution role,
  the job-run and guard custom resources);
* :mod:`infra.serverless.job_run_handler`: the custom resources' Lambda code.

The Lambda's code keeps the module path it has always had inside its asset:
:data:`infra.serverless.job_run_handler.HANDLER_FILES` stages this package's
``job_run_handler.py`` as ``infra/serverless_job_run_handler.py``, so that the
function's ``Handler`` (``infra.serverless_job_run_handler.handler``), written
in every deployed template, does not change with the source tree. The handler
imports nothing from this package, so the asset needs no copy of it.
"""
