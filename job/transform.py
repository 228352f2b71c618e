"""Pure DataFrame functions: classify raw Kinesis records, split, de-duplicate.

Everything here is ``DataFrame -> DataFrame`` with no I/O, so each step is
unit-tested on small static frames and the sink only wires them together.

Parsing goes through Spark's VARIANT (``try_parse_json``) instead of
``from_json``: ``from_json`` silently turns ``"id": 42`` into the string
``"42"`` and a nested object into its text, so a wrong type would pass as
valid. A variant keeps the JSON type of each value, which gives a precise
failure taxonomy without a Python UDF (the whole classification stays in the
JVM, narrow, no shuffle).

Failure reasons, in precedence order (the first that applies wins):

``too_large``      the record is larger than ``max_record_bytes`` (not parsed)
``bad_aggregate``  a KPL aggregate (magic ``F3 89 9A C2``) the source could not
                   de-aggregate: MD5 mismatch, unreadable protobuf, no records
``not_utf8``       the bytes are not valid UTF-8
``malformed_json`` not JSON, or JSON but not an object (``[1]``, ``"x"``, ``null``)
``trailing_data``  a JSON value followed by more than whitespace: concatenated or
                   newline-separated objects, a stray ``}`` or ``]``, free text
``missing_field``  a required field is absent or ``null``
``wrong_type``     a field has another JSON type than the schema says
``bad_timestamp``  a timestamp field is a string but not ISO-8601 / not a real instant
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as sf

from job.undeclared import with_undeclared
from model import table_layout as layout
from model.config import DEFAULT_EVENT_FIELDS, EventField
from model.kpl import DIGEST_SIZE as KPL_DIGEST_SIZE
from model.kpl import MAGIC as KPL_MAGIC
from model.record import (
    BAD_AGGREGATE,
    BAD_TIMESTAMP,
    COORDINATES,
    DATA,
    ERROR_CLASS,
    ERROR_CLASSES,
    JSON_TEXT_TYPES,
    MALFORMED_JSON,
    MESSAGE,
    MISSING_FIELD,
    NOT_UTF8,
    REASON,
    SPARK_TYPES,
    TOO_LARGE,
    TRAILING_DATA,
    UNDECLARED_FIELDS,
    UNDECLARED_KEYS,
    WRONG_TYPE,
    column_name,
    raw_column_name,
)

# ISO-8601 extended form: date, 'T', time with 1-9 fractional digits, optional
# offset ('Z' or +hh:mm). Spark's cast alone is laxer (it takes a bare date or
# 10+ fractional digits), so the shape is checked first.
ISO_TIMESTAMP: Final = (
    r"^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}"
    r"(\.[0-9]{1,9})?(Z|[+-][0-9]{2}:[0-9]{2})?$"
)
_MICROS_PER_DAY: Final = 86_400_000_000

# A leading byte order mark is ignored: RFC 8259 section 8.1 forbids sending one
# but lets a parser ignore it (https://www.rfc-editor.org/rfc/rfc8259#section-8.1);
# Spark's parser rejects it. Only the first character: a second BOM, or one
# after the value, is an error like any other.
BOM: Final = "\ufeff"
# JSON's whitespace (RFC 8259 section 2), the only text allowed around the value.
JSON_WHITESPACE: Final = " \t\n\r"
# ``try_parse_json`` stops after the first JSON value and ignores the rest, so
# the text is parsed inside ``[<text>,"\u0000"]``: the sentinel string is the
# array's second element only when the parser read the whole text. Text after
# the value either breaks the array (``x``, ``}``, a second object) or closes it
# early (a stray ``]``: the sentinel is never read), or adds elements before
# the sentinel (``,{...}``). One parse, no second pass over the text.
_SENTINEL: Final = "\u0000"
_WRAP_OPEN: Final = "["
_WRAP_CLOSE: Final = ',"\\u0000"]'
_STRIP_BOM_TO: Final = 1 << 30


def event_columns(fields: Sequence[EventField]) -> list[tuple[str, str]]:
    """``(column, spark type)`` of the parsed event, in schema order."""
    return [(col.name, SPARK_TYPES[col.type]) for col in layout.event_columns(fields)]


def parse_timestamp(text: Column) -> Column:
    """ISO-8601 string -> timestamp (UTC instant, microseconds; extra digits are
    truncated, never rounded). Null when the shape or the calendar is wrong.
    A value without offset is read as UTC, independent of the session zone."""
    # Once the shape matched, an offset is there exactly when the text ends in
    # 'Z' or its 6th character from the end is the offset's sign ("+hh:mm"):
    # a string test instead of a second regular expression per row.
    has_offset = text.endswith("Z") | sf.substring(text, -6, 1).isin("+", "-")
    with_offset = sf.when(has_offset, text).otherwise(sf.concat(text, sf.lit("Z")))
    return sf.when(text.rlike(ISO_TIMESTAMP), sf.try_to_timestamp(with_offset))


def utc_date(ts: Column) -> Column:
    """The UTC calendar date of an instant, whatever ``spark.sql.session.timeZone`` is."""
    days = sf.floor(sf.unix_micros(ts) / sf.lit(_MICROS_PER_DAY)).cast("int")
    return sf.date_from_unix_date(days)


def _json_path(name: str) -> str:
    return "$['" + name.replace("'", "\\'") + "']"


# The event inside the parse's ``[<text>,"\u0000"]`` wrapper.
_DOC_ELEMENT: Final = 0
_DOC_PATH: Final = f"$[{_DOC_ELEMENT}]"


def _bad_aggregate_message(data: Column) -> Column:
    """Why a record that starts with the KPL magic is still here: a source
    de-aggregates every readable aggregate (:mod:`model.kpl`). Computed
    on the failing rows only (the message of the branch taken)."""
    head = len(KPL_MAGIC)
    body = sf.substring(data, head + 1, sf.length(data) - head - KPL_DIGEST_SIZE)
    digest = sf.lower(sf.hex(sf.substring(data, -KPL_DIGEST_SIZE, KPL_DIGEST_SIZE)))
    prefix = "record starts with the KPL aggregation magic (F3 89 9A C2) but is not a readable "
    return (
        sf.when(
            sf.length(data) <= head + KPL_DIGEST_SIZE,
            sf.lit(prefix + "aggregate: too short to hold its MD5"),
        )
        .when(sf.md5(body) != digest, sf.lit(prefix + "aggregate: its MD5 does not match"))
        .otherwise(
            sf.lit(
                prefix + "aggregate: its MD5 matches but its protobuf is not an "
                "AggregatedRecord with at least one record"
            )
        )
    )


# ``schema_of_variant`` of a scalar JSON value, by the schema's type. Spark's
# JSON parser stores integers in the smallest integral type that holds them,
# other numbers as DECIMAL(p,s) or DOUBLE, and ``null`` as VOID.
_INTEGRAL: Final = ("TINYINT", "SMALLINT", "INT", "BIGINT")
# JSON text kept as the value (the type check reads its first character).
_TEXT_TYPES: Final = JSON_TEXT_TYPES


def _kind(spec: EventField, sub: Column) -> Column:
    """What the type check of one field reads: for object/array fields the
    value's JSON text (also what the table stores), for scalar fields
    ``schema_of_variant``. Serializing every value to JSON text to read its
    first character cost 0.5 s per field per 200,000 records; the schema of a
    scalar is a type tag."""
    return sf.to_json(sub) if spec.type in _TEXT_TYPES else sf.schema_of_variant(sub)


def _kind_ok(spec: EventField, kind: Column) -> Column:
    """True when the JSON value has the schema's type (``kind`` from :func:`_kind`)."""
    if spec.type == "object":
        return sf.substring(kind, 1, 1) == sf.lit("{")
    if spec.type == "array":
        return sf.substring(kind, 1, 1) == sf.lit("[")
    if spec.type in ("string", "timestamp"):
        return kind == sf.lit("STRING")
    if spec.type == "boolean":
        return kind == sf.lit("BOOLEAN")
    if spec.type == "long":
        return kind.isin(*_INTEGRAL)
    if spec.type == "int":  # and it fits 32 bits: classify checks the value too
        return kind.isin(*_INTEGRAL)
    # float, double: any JSON number (a float keeps ~7 significant digits)
    return kind.isin(*_INTEGRAL, "FLOAT", "DOUBLE") | kind.startswith("DECIMAL(")


def _value(spec: EventField, sub: Column, kind: Column) -> Column:
    """The field's column value, read from the field's own variant (no second
    path lookup in the document)."""
    if spec.type in _TEXT_TYPES:
        return kind
    return sf.try_variant_get(sub, "$", SPARK_TYPES[spec.type])


def classify(
    raw: DataFrame,
    *,
    fields: Sequence[EventField] = DEFAULT_EVENT_FIELDS,
    max_record_bytes: int,
) -> DataFrame:
    """Source rows + parsed event columns + ``failure_reason/message/class``
    (null on valid rows). One output row per input row, always: this is what
    makes "nothing is dropped" hold. Narrow (no shuffle).

    Built in the taxonomy's stages (:func:`decode`, :func:`parse`,
    :func:`extract`, the undeclared keys (read from what extract staged),
    :func:`judge`) so that each expensive
    expression (the UTF-8 check, the JSON parse, each timestamp parse) is a
    column computed once per row and only referenced afterwards.
    """
    staged = decode(raw, max_record_bytes)
    staged = parse(staged)
    staged = extract(staged, fields)
    staged = with_undeclared(
        staged,
        sf.col("_doc"),
        fields,
        subs=[sf.col(f"_v{i}") for i in range(len(fields))],
        element=_DOC_ELEMENT,
    )
    return judge(staged, raw.columns, fields, max_record_bytes)


def decode(raw: DataFrame, max_record_bytes: int) -> DataFrame:
    """Stage 1, the bytes: ``_decoded`` (the text of a record that fits
    ``max_record_bytes``), ``_utf8`` (it is valid UTF-8) and ``_body`` (the
    text without its leading byte order mark)."""
    staged = raw.select(
        "*", sf.when(_fits(max_record_bytes), sf.col(DATA).cast("string")).alias("_decoded")
    )
    staged = staged.select("*", sf.is_valid_utf8("_decoded").alias("_utf8"))
    text = sf.when(sf.col("_utf8"), sf.col("_decoded"))
    body = sf.when(text.startswith(BOM), sf.substring(text, 2, _STRIP_BOM_TO)).otherwise(text)
    return staged.select("*", body.alias("_body"))


def _fits(max_record_bytes: int) -> Column:
    return sf.length(sf.col(DATA)) <= sf.lit(max_record_bytes)


def parse(staged: DataFrame) -> DataFrame:
    """Stage 2, the JSON: ``_wrapped`` (the body parsed inside its sentinel
    wrapper, once), ``_whole`` (the body is one JSON value and whitespace) and
    ``_doc`` (the wrapper, when that value is an object)."""
    wrapped = sf.concat(sf.lit(_WRAP_OPEN), sf.col("_body"), sf.lit(_WRAP_CLOSE))
    staged = staged.select("*", sf.try_parse_json(wrapped).alias("_wrapped"))
    # The whole text is one JSON value (and whitespace): the sentinel was read.
    whole = sf.try_variant_get("_wrapped", "$[1]", "string") == sf.lit(_SENTINEL)
    staged = staged.select("*", sf.coalesce(whole, sf.lit(False)).alias("_whole"))
    # Almost every record starts with its '{': the trim (a copy of the text)
    # runs only for the others.
    starts_object = sf.col("_body").startswith("{") | sf.ltrim(
        "_body", sf.lit(JSON_WHITESPACE)
    ).startswith("{")
    is_object = sf.col("_whole") & starts_object
    return staged.select("*", sf.when(is_object, sf.col("_wrapped")).alias("_doc"))


def extract(staged: DataFrame, fields: Sequence[EventField]) -> DataFrame:
    """Stage 3, the fields: each one's variant (``_v<i>``, the one path lookup
    per field) and kind (``_k<i>``, what its type check reads), then its
    column value; a timestamp's text as sent, then its parsed instant."""
    doc = sf.col("_doc")
    staged = staged.select(
        "*",
        *(
            sf.try_variant_get(doc, _DOC_PATH + _json_path(spec.name)[1:], "variant").alias(
                f"_v{i}"
            )
            for i, spec in enumerate(fields)
        ),
    )
    staged = staged.select(
        "*", *(_kind(spec, sf.col(f"_v{i}")).alias(f"_k{i}") for i, spec in enumerate(fields))
    )
    staged = staged.select("*", *(_field_value(i, spec) for i, spec in enumerate(fields)))
    # Timestamps parse from the staged raw strings: once per row.
    return staged.select(
        "*",
        *(
            parse_timestamp(sf.col(raw_column_name(spec.name))).alias(column_name(spec.name))
            for spec in fields
            if spec.type == "timestamp"
        ),
    )


def _present(i: int) -> Column:
    """Field ``i`` is in the object and not JSON ``null``."""
    sub = sf.col(f"_v{i}")
    return sub.isNotNull() & ~sf.is_variant_null(sub)


def _field_value(i: int, spec: EventField) -> Column:
    """Field ``i``'s column: its value, or for a timestamp the text as sent
    (the instant is parsed from it afterwards)."""
    sub = sf.col(f"_v{i}")
    if spec.type == "timestamp":
        raw_text = sf.when(_present(i), sf.try_variant_get(sub, "$", "string"))
        return raw_text.alias(raw_column_name(spec.name))
    return sf.when(_present(i), _value(spec, sub, sf.col(f"_k{i}"))).alias(column_name(spec.name))


# One check of the taxonomy: when it fails a record, its reason and message.
_Check = tuple[Column, str, Column]


def record_checks(max_record_bytes: int) -> list[_Check]:
    """The checks of the record as a whole, in precedence order: its size, a
    KPL aggregate left whole, its encoding, its JSON."""
    data = sf.col(DATA)
    return [
        (data.isNull(), MALFORMED_JSON, sf.lit("record has no data")),
        (
            ~_fits(max_record_bytes),
            TOO_LARGE,
            sf.format_string(
                f"record is %d bytes, more than max_record_bytes={max_record_bytes}",
                sf.length(data),
            ),
        ),
        (data.startswith(sf.lit(KPL_MAGIC)), BAD_AGGREGATE, _bad_aggregate_message(data)),
        (~sf.col("_utf8"), NOT_UTF8, sf.lit("record bytes are not valid UTF-8")),
        # Only a failing row reaches the second parse (the plain text): it tells
        # "not JSON at all" from "JSON, then more".
        (
            ~sf.col("_whole") & sf.try_parse_json("_body").isNull(),
            MALFORMED_JSON,
            sf.lit("record is not valid JSON"),
        ),
        (
            ~sf.col("_whole"),
            TRAILING_DATA,
            sf.lit(
                "record holds more than its JSON value: only whitespace may follow it "
                "(two objects in one record? one record per event)"
            ),
        ),
        (sf.col("_doc").isNull(), MALFORMED_JSON, sf.lit("record is JSON but not an object")),
    ]


def field_checks(fields: Sequence[EventField]) -> list[_Check]:
    """The checks of the event's fields, in precedence order: every required
    field's presence, then every field's type, then every timestamp's text."""
    missing: list[_Check] = []
    types: list[_Check] = []
    times: list[_Check] = []
    for i, spec in enumerate(fields):
        present = _present(i)
        if spec.required:
            message = f"required field {spec.name!r} is absent or null"
            missing.append((~present, MISSING_FIELD, sf.lit(message)))
        wrong = ~_kind_ok(spec, sf.col(f"_k{i}"))
        if spec.type == "int":  # Spark's variant stores every JSON integer as BIGINT
            wrong = wrong | sf.try_variant_get(sf.col(f"_v{i}"), "$", "int").isNull()
        message = f"field {spec.name!r} must be a JSON {spec.type}"
        types.append((present & wrong, WRONG_TYPE, sf.lit(message)))
        if spec.type == "timestamp":
            message = (
                f"field {spec.name!r} is not an ISO-8601 timestamp "
                "(yyyy-MM-ddTHH:mm:ss[.fffffffff][Z|+hh:mm])"
            )
            unparsed = present & sf.col(column_name(spec.name)).isNull()
            times.append((unparsed, BAD_TIMESTAMP, sf.lit(message)))
    return [*missing, *types, *times]


def judge(
    staged: DataFrame,
    raw_columns: Sequence[str],
    fields: Sequence[EventField],
    max_record_bytes: int,
) -> DataFrame:
    """Stage 4, the verdict: the first check a record fails (the taxonomy's
    precedence) gives its reason, message and error class; the staged
    columns are dropped."""
    verdict: Column = sf.lit(None).cast("struct<reason:string,message:string>")
    for cond, reason, message in reversed(
        [*record_checks(max_record_bytes), *field_checks(fields)]
    ):
        verdict = sf.when(
            cond, sf.struct(sf.lit(reason).alias("reason"), message.alias("message"))
        ).otherwise(verdict)
    classes = sf.create_map(*(sf.lit(x) for pair in ERROR_CLASSES.items() for x in pair))
    kept = [*raw_columns, *(name for name, _ in event_columns(fields))]
    judged = staged.select(*kept, UNDECLARED_FIELDS, UNDECLARED_KEYS, verdict.alias("_verdict"))
    return judged.select(
        *kept,
        UNDECLARED_FIELDS,
        UNDECLARED_KEYS,
        sf.col("_verdict.reason").alias(REASON),
        sf.col("_verdict.message").alias(MESSAGE),
        classes[sf.col("_verdict.reason")].alias(ERROR_CLASS),
    )


def failures(classified: DataFrame) -> DataFrame:
    """Failure records: original bytes, source coordinates, reason, message."""
    coordinates = [c.source for c in COORDINATES]
    return classified.where(sf.col(REASON).isNotNull()).select(
        DATA, *coordinates, REASON, MESSAGE, ERROR_CLASS
    )
