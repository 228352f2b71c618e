"""The events table, its one owner: layout, Iceberg schema and partition spec,
the start-up checks, properties, file writing and the exactly-once commit.

Empty on purpose: :mod:`model.table_layout` is imported by :mod:`infra` at synth
and must not pull Spark or pyiceberg in through this package.
"""
