"""The sample-event producer, and what acts on a pipeline instance from
outside its job, on AWS or on a local run.

Three users share it: the operator commands (``scripts/``) run against a real
account, the laptop harness (``local/``) runs everything on emulators, and the
benchmarks (``bench/``) drive the job at load. All of them need the same few
things, which live here:

* the sample event mix and the producer that puts it on a stream
  (:mod:`producer.events`, :mod:`producer.aggregation`, :mod:`producer.producer`);
* the one PutRecords writer (:mod:`producer.kinesis_put`): the producer and
  ``python -m scripts.reprocess`` both put through it;
* what a local run leaves for a command aimed at it (:mod:`producer.local_run`);
* the argument types every command checks its numbers with
  (:mod:`producer.arguments`);
* where a read of the failure topic ends (:mod:`producer.topic_end`).

They live here, not in ``local/``, so that an operator command never pulls in
the harness (emulators, Spark child processes, report drawing), and not in
``job/`` or ``model/``, because what ships to EMR in app.zip is exactly what
the job imports (tests/deploy/test_app_package.py), and the job never produces
sample events nor reads the failure topic.

Like ``local/`` and ``scripts/``, this package may use ``model`` and
``infra``; it imports neither ``local``, ``scripts`` nor ``bench``
(``tests/test_architecture.py``).
"""
