"""What works on a pipeline instance from outside its job, on AWS or on a local run.

The operator commands (``scripts/``) run against a real account, the laptop
harness (``local/``) runs everything on emulators, and both need the same few
things: the sample event mix and the producer that puts it on a stream
(:mod:`ops.events`, :mod:`ops.aggregation`, :mod:`ops.producer`), what a
local run leaves for a command aimed at it (:mod:`ops.local_run`), and where a
read of the failure topic ends (:mod:`ops.topic_end`). They live
here, not in ``local/``, so that an operator command never pulls in the
harness (emulators, Spark child processes, report drawing), and not in
``app/``, because the job that ships to EMR never produces sample events.
Like ``local/`` and ``scripts/``, this package may use ``app`` and ``infra``;
it imports neither ``local`` nor ``scripts`` (``tests/test_architecture.py``).
"""
