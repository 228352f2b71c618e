"""``make bench``: benchmarks reported as ratios to a baseline measured in the same run.

Absolute figures on a shared 2-core machine against emulators say little; a
ratio to a baseline measured side by side, in the same minute, is what a
change moves. ``python -m bench [NAME ...] [--quick] [--out-dir DIR]`` runs
``throughput``, ``growth``, ``state``, ``overhead`` and ``kinesis_source``
(:mod:`bench.framework`: 3 repeats, min and median, machine facts); results go
to ``bench/results/<name>.json`` and ``<name>.png``, and one table is printed.
"""
