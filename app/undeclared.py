"""Keys a record carries that no event field declares: kept with the row, not
dropped unseen (issue 34; docs/infra.md, "Event schema").

One step of :func:`app.transform.classify`, in a module of its own because its
cost is a bar of its own (docs/job.md, "Keys no field declares: the cost"):
:func:`with_undeclared` reads what the classification already staged and
lets only the rows that may hold an undeclared key pay for finding them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Final

from app.config import EventField
from app.record import (
    JSON_TEXT_TYPES,
    UNDECLARED_FIELDS,
    UNDECLARED_KEYS,
    column_name,
    raw_column_name,
)

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame


# What ``to_json`` prints only for a double, the one JSON value it may print
# longer than the text spelled it (``1e3`` -> ``1000.0``, ``1e400`` ->
# ``"Infinity"``); integers and decimals print no longer than sent.
_DOUBLE_MARKS: Final = (".", "E", "Infinity")


def _text_floor(spec: EventField, sub: Column, kind: Column, text: Column | None) -> Column:
    """The fewest UTF-8 bytes the member's value can take in the record's text
    (``sub`` the value's variant, ``kind`` its variant kind (``app.transform``), ``text`` the
    value as classify already read it: the string of a string or timestamp
    field, the compact JSON of an object or array field). Each value takes at
    least 1 byte; a string its bytes and quotes (an escape is never shorter
    than the character it spells); an object or array field its compact
    JSON, unless that holds a double (printed with a ``.``, an ``E`` or as
    ``"Infinity"``, possibly longer than sent: ``1e3`` -> ``1000.0``)."""
    from pyspark.sql import functions as sf

    floor = sf.lit(1)
    if text is not None and spec.type in JSON_TEXT_TYPES:
        doubles = sf.lit(False)
        for mark in _DOUBLE_MARKS:
            doubles = doubles | text.contains(mark)
        floor = sf.when(~doubles, sf.octet_length(text))
    elif text is not None:
        floor = sf.when(kind == sf.lit("STRING"), sf.octet_length(text) + 2)
    # ``text`` is null on a JSON null: 1 byte (of its 4).
    return sf.when(sub.isNull(), sf.lit(0)).otherwise(sf.coalesce(floor, sf.lit(1)))


def read_text(spec: EventField) -> Column | None:
    """The staged column of classify's that :func:`_text_floor` reads for a field, if any."""
    from pyspark.sql import functions as sf

    if spec.type == "timestamp":
        return sf.col(raw_column_name(spec.name))
    if spec.type in ("string", *JSON_TEXT_TYPES):
        return sf.col(column_name(spec.name))
    return None


def with_undeclared(
    staged: DataFrame,
    doc: Column,
    fields: Sequence[EventField],
    *,
    subs: Sequence[Column],
    kinds: Sequence[Column],
    texts: Sequence[Column | None],
    doc_path: str,
) -> DataFrame:
    """``staged`` plus :data:`UNDECLARED_FIELDS` (the object's undeclared keys
    and their values, compact JSON) and :data:`UNDECLARED_KEYS` (their names),
    both null when the record carries no key beyond ``fields`` (and on a
    record that is not an object). ``subs``, ``kinds`` and ``texts`` are what
    classify already read of each field: its variant (null when the key is
    absent), its kind (``app.transform``), and the column :func:`read_text`
    names; ``doc_path`` is where the event sits in ``doc``.

    Read from the variant the classification already parsed (``doc``, the
    event inside its wrapper): no second parse of the text and no Python, and
    ``to_json`` writes the kept values as they were sent (objects and arrays
    included). The key names come from a cast of the object to ``map<string,
    variant>`` and a set difference with the declared ones, and only the rows
    that may have undeclared keys pay it (``when`` evaluates the branch it
    takes): a row whose text (UTF-8 bytes) is no longer than the fewest bytes
    its declared members can take (:func:`_text_floor`: braces, commas,
    quoted names, colons, values) has none, since an undeclared member adds
    at least 5 bytes (``,"":0``). The gate never misses a row; it over-selects
    rows with whitespace, escapes, a double in an object field, or a number
    or boolean field (counted at 1 byte). Compact records of string,
    timestamp and object fields, the common case, skip the cast. Measured
    (docs/job.md, "Keys no field declares: the cost", with the alternatives
    tried): the capture's extra core time in ``classify`` went from 0.78 s to
    0.53 s per 200,000 records, half of the rest being the gate itself; the
    whole batch still measured 12-15 % below the job without capture (issue
    34's bar: 5 %). Keys are compared exactly, as JSON spells them: ``Channel`` is not a declared
    ``channel``."""
    from pyspark.sql import functions as sf

    declared = sf.array(*(sf.lit(spec.name) for spec in fields))

    present = [sub.isNotNull() for sub in subs]
    count = sum((sf.when(p, sf.lit(1)).otherwise(sf.lit(0)) for p in present), sf.lit(0))
    # Braces, commas between the declared members, each one's quoted name and colon.
    floor = sf.lit(2) + sf.greatest(count - sf.lit(1), sf.lit(0))
    for spec, sub, kind, text, here in zip(fields, subs, kinds, texts, present, strict=True):
        name = sf.when(here, sf.lit(len(spec.name.encode()) + 3)).otherwise(sf.lit(0))
        floor = floor + name + _text_floor(spec, sub, kind, text)
    longer = sf.octet_length("_body") > floor
    # The cast once per gated row: its key names and its kept members both read it.
    members = sf.try_variant_get(doc, doc_path, "map<string,variant>")
    staged = staged.select("*", sf.when(longer, members).alias("_members"))
    extra_keys = sf.array_except(sf.map_keys("_members"), declared)
    staged = staged.select("*", extra_keys.alias("_extra_keys"))
    some = sf.coalesce(sf.size("_extra_keys") > sf.lit(0), sf.lit(False))
    extra = sf.map_filter("_members", lambda key, _: ~sf.array_contains(declared, key))
    return staged.select(
        "*",
        sf.when(some, sf.to_json(extra)).alias(UNDECLARED_FIELDS),
        sf.when(some, sf.col("_extra_keys")).alias(UNDECLARED_KEYS),
    )
