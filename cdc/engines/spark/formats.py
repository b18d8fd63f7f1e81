"""The capture formats (cdc.formats) rendered in Spark: each ev_type shape as a predicate,
each op rule and JVM decoder as an expression, and the classifiers made from the registry.

The formats are data (cdc.formats.spec), so that cdc.formats never imports Spark; this
module is their one Spark rendering, case by case. A new capture format needs nothing here,
unless it brings a new kind of shape, op rule or JVM decoder (then its case below).

- ``format_flags``: Spark aggregates, the formats of the events of a batch read through JDBC
  (the counterpart of cdc.formats.formats_of, Arrow, for a batch read with COPY);
- ``format_of`` and ``op_of``: each event's format and op, for decoding
  (cdc.engines.spark.decode.with_op_and_map, which also applies ``jvm_map``).
"""

from __future__ import annotations

from functools import reduce

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql.types import MapType, StringType

from cdc.formats import FORMATS, RECREATED, RECREATED_OP, TRUNCATE_TYPES
from cdc.formats.spec import (
    EvTypeShape,
    FirstLetter,
    JsonObject,
    JsonOp,
    JvmMap,
    Matches,
    OneOf,
    OpRule,
    StartsWith,
    UrlEncoded,
)

__all__ = ["format_flags", "format_of", "jvm_map", "matches", "op", "op_of"]


def matches(shape: EvTypeShape, ev_type: Column) -> Column:
    """Whether each ev_type has this shape (as its ``arrow`` form says on the driver)."""
    match shape:
        case StartsWith(prefix):
            return ev_type.startswith(prefix)
        case Matches(regex):
            return ev_type.rlike(regex)
        case OneOf(values):
            return ev_type.isin(*values)
    raise TypeError(f"no Spark rendering of the ev_type shape {shape!r}")


def op(rule: OpRule, ev_type: Column) -> Column:
    """The op (I, U, D; R for a TRUNCATE in the format's own shape) of each ev_type."""
    match rule:
        case FirstLetter():
            return F.substring(ev_type, 1, 1)
        case JsonOp(path, truncate):
            json_op = F.get_json_object(ev_type, path)
            return F.when(json_op == truncate, F.lit("R")).otherwise(F.substring(json_op, 1, 1))
    raise TypeError(f"no Spark rendering of the op rule {rule!r}")


def jvm_map(decoder: JvmMap, ev_data: Column) -> Column:
    """The map column -> text of each ev_data, decoded inside the JVM; null where it does
    not decode."""
    match decoder:
        case JsonObject(max_string_len):
            options = {"maxStringLen": str(max_string_len)}
            return F.from_json(ev_data, MapType(StringType(), StringType()), options)
        case UrlEncoded(separator, equals):
            pairs = F.str_to_map(ev_data, F.lit(separator), F.lit(equals))
            keys_decoded = F.transform_keys(pairs, lambda k, _: F.try_url_decode(k))
            return F.transform_values(keys_decoded, lambda _, v: F.try_url_decode(v))
    raise TypeError(f"no Spark rendering of the JVM decoder {decoder!r}")


def format_flags(ev_type: Column | None = None) -> list[Column]:
    """Per format, whether a group of raw events holds an event of it: boolean aggregates
    named after the formats, the Spark counterpart of cdc.formats.formats_of."""
    col = F.col("ev_type") if ev_type is None else ev_type
    return [F.max(matches(f.ev_type, col)).alias(f.name) for f in FORMATS]


def format_of(ev_type: Column) -> Column:
    """The format name of each event's ev_type; null for a shared TRUNCATE and for an
    ev_type that no format writes."""
    first, *rest = FORMATS
    case = F.when(matches(first.ev_type, ev_type), F.lit(first.name))
    return reduce(lambda c, f: c.when(matches(f.ev_type, ev_type), F.lit(f.name)), rest, case)


def op_of(ev_type: Column, fmt: Column) -> Column:
    """I, U, D, R or X of each event, given its format (``format_of``); null when unknown."""
    case = F.when(ev_type.isin(*TRUNCATE_TYPES), F.lit("R")).when(
        ev_type == RECREATED, F.lit(RECREATED_OP)
    )
    return reduce(lambda c, f: c.when(fmt == f.name, op(f.op, ev_type)), FORMATS, case)
