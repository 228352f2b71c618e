"""What works on a pipeline instance from outside its job, on AWS or on a local run.

Three users share it: the operator commands (``scripts/``) run against a real
account, the laptop harness (``local/``) runs everything on emulators, and the
benchmarks (``bench/``) drive the job at load. All of them need the same few
things, which live here:

* the sample event mix and the producer that puts it on a stream
  (:mod:`ops.events`, :mod:`ops.aggregation`, :mod:`ops.producer`);
* the one PutRecords writer (:mod:`ops.kinesis_put`): the producer and
  ``python -m scripts.reprocess`` both put through it;
* what a local run leaves for a command aimed at it (:mod:`ops.local_run`);
* where a read of the failure topic ends (:mod:`ops.topic_end`).

They live here, not in ``local/``, so that an operator command never pulls in
the harness (emulators, Spark child processes, report drawing), and not in
``app/``, because the job that ships to EMR never produces sample events. The
package keeps its short name: every importer (local, scripts, bench, tests)
already reads ``ops.producer`` as "the operator side's producer", and this
docstring says what the name alone does not.

Like ``local/`` and ``scripts/``, this package may use ``app`` and ``infra``;
it imports neither ``local``, ``scripts`` nor ``bench``
(``tests/test_architecture.py``).
"""
