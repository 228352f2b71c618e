"""``python -m scripts.reprocess`` (``make reprocess``): re-send failure records.

The command is :mod:`scripts.reprocess.__main__` (flags, plan, output). Beside
it: one run over the records, sending and committing (:mod:`~scripts.reprocess.run`),
reading the failure topic (:mod:`~scripts.reprocess.kafka`), claim-check originals
(:mod:`~scripts.reprocess.claim_check`), the fix-up hook's contract
(:mod:`~scripts.reprocess.hook`), the pure plan (selection, starts, consumer
positions, the entry of a record: :mod:`~scripts.reprocess.plan`). The
Kinesis puts are :mod:`producer.kinesis_put`'s, the sample producer's writer too.

A fix-up hook imports its two names from here, ``from scripts.reprocess
import FailedRecord, Reject`` (docs/operate.md, "The fix-up hook"): the
hook's contract stays where operators were told to find it.
"""

from scripts.reprocess.hook import FailedRecord, Reject

__all__ = ["FailedRecord", "Reject"]
