"""What an instance costs a month, in one place: the estimate of a
synthesized template (:mod:`infra.cost.estimate`: ``make cost``'s report and
the line per instance ``cdk synth`` prints), the lines a template's resources
bill (:mod:`infra.cost.lines`), the unit-price table (:mod:`infra.cost.prices`),
the measured requests per batch (:mod:`infra.cost.requests`, reading
``request_counts.json``) and the same prices read live from the AWS Price List
API (:mod:`infra.cost.live`).

The command itself is ``scripts/cost.py`` (``make cost``): it fails the way
every operator command does (:mod:`scripts.command`), which ``infra`` may not
import. This file stays empty of code: :mod:`infra.config` imports
:mod:`infra.advice`, which imports :mod:`infra.cost.lines`, and an estimate
API here (it needs :mod:`infra.config`) would make that import a cycle.
"""
