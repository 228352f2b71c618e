"""Keys a record carries that no event field declares: kept with the row, not
dropped unseen (docs/infra.md, "Event schema").

One step of :func:`job.transform.classify`, in a module of its own because its
cost is a bar of its own (docs/job.md, "Keys no field declares: the cost"):
:func:`with_undeclared` reads the variant the classification already parsed,
through two small JVM functions of the job's jar (``jvm/src/streaming/undeclared``,
:mod:`model.jvm`), so that only the rows that hold an undeclared key pay for
finding it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as sf
from pyspark.sql.types import IntegerType

from job.java_classes import jvm_class
from model.config import EventField
from model.record import UNDECLARED_FIELDS, UNDECLARED_KEYS

# The functions' names in the session, their classes and what they return.
SIZE_FUNCTION: Final = "streaming_object_size"
SIZE_CLASS: Final = "streaming.undeclared.ObjectSize"
MEMBERS_FUNCTION: Final = "streaming_undeclared_members"
MEMBERS_CLASS: Final = "streaming.undeclared.UndeclaredMembers"
_MEMBERS_TYPE: Final = "struct<fields:string,keys:array<string>>"


def register_functions(spark: SparkSession) -> None:
    """Registers the two functions in ``spark`` (again is harmless), or says
    which class is missing from the classpath and how to get it."""
    for name in (SIZE_CLASS, MEMBERS_CLASS):
        jvm_class(spark, name)
    spark.udf.registerJavaFunction(SIZE_FUNCTION, SIZE_CLASS, IntegerType())
    spark.udf.registerJavaFunction(MEMBERS_FUNCTION, MEMBERS_CLASS, _MEMBERS_TYPE)


def with_undeclared(
    staged: DataFrame,
    doc: Column,
    fields: Sequence[EventField],
    *,
    subs: Sequence[Column],
    element: int,
) -> DataFrame:
    """``staged`` plus :data:`UNDECLARED_FIELDS` (the object's undeclared keys
    and their values, compact JSON) and :data:`UNDECLARED_KEYS` (their names),
    both null when the record carries no key beyond ``fields`` (and on a
    record that is not an object). ``doc`` is the parsed record inside
    classify's wrapper, an array whose element ``element`` is the event;
    ``subs`` are what classify read of each field, its variant (null when
    the key is absent, a variant null for a JSON ``null``).

    A row holds an undeclared key exactly when its object has more members
    than the declared keys it holds (JSON keys in a parsed variant are
    unique: Spark refuses duplicates). The member count is read from the
    object's header (``ObjectSize``), so every row can afford it, and only the
    rows with more members call ``UndeclaredMembers`` (``when`` evaluates the
    branch it takes), which writes the kept members as ``to_json`` would
    (objects and arrays included, as sent) with their names. Both are
    ordinary Java UDFs, with generated code around them. Keys are compared
    exactly, as JSON spells them: ``Channel`` is not a declared ``channel``.

    Measured (docs/job.md, "Keys no field declares: the cost", with the
    designs tried before): ``python -m bench throughput`` put the whole batch
    with the capture at -0.9 % and +1.9 % of the same job without it; the
    same result from Spark's own expressions (a ``map<string,variant>`` cast,
    ``map_filter``, ``to_json``) cost 12-15 %, mostly because ``map_filter``
    has no generated code and split the stage's generated code in two."""
    register_functions(staged.sparkSession)
    ones = (sf.when(sub.isNotNull(), sf.lit(1)).otherwise(sf.lit(0)) for sub in subs)
    held = sum(ones, sf.lit(0))
    index = sf.lit(element)
    more = sf.call_function(SIZE_FUNCTION, doc, index) > held
    declared = sf.array(*(sf.lit(spec.name) for spec in fields))
    members = sf.when(more, sf.call_function(MEMBERS_FUNCTION, doc, index, declared))
    staged = staged.select("*", members.alias("_undeclared"))
    return staged.select(
        "*",
        sf.col("_undeclared.fields").alias(UNDECLARED_FIELDS),
        sf.col("_undeclared.keys").alias(UNDECLARED_KEYS),
    )
