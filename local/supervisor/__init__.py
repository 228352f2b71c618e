"""The supervisor's local adapters: the same decision as its Lambda
(:mod:`infra.supervisor`, where the component's construct and code live),
run against this machine.

* :mod:`local.supervisor.emr`: the local harness plays EMR (a restart
  starts the job's child process again);
* :mod:`local.supervisor.serverless`: the patched EMR Serverless in this
  process, the real supervisor Lambda and custom resource on top.

They stay under ``local`` because they import the harness (:mod:`local.harness`,
the emulators), which ``infra`` never imports (tests/test_architecture.py).
"""
