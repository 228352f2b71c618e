"""``python -m scripts.status`` (``make status``): what one instance's job is doing.

The command is :mod:`scripts.status.__main__`; each module beside it reads one
source (the job's lease, checkpoint, shards, metrics and alarms, table,
optimizers, supervisor record, undeclared keys) or lays the answers out
(:mod:`scripts.status.report`). :mod:`scripts.status.target` says which
instance a command aims at; ``stop`` and ``migrate_checkpoint`` use it and
the lease reader too. Nothing is imported here, so ``python -m`` runs the
command without importing it twice.
"""
