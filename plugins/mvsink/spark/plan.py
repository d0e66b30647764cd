"""Is a view's query multiset-linear in a source? Decided on Spark's analyzed plan as a tree, failing closed.

Incremental refresh (``mvsink.incremental``) evaluates the user's query with one source replaced by
its change set. That is only correct when the query is *linear* in that source: every operator
between the source and the result maps a multiset of input rows to the sum of its rows' outputs
(projections, filters, inner joins, UNION ALL, explode ...). This module proves that on the
analyzed logical plan, and answers "not linear, because ..." for anything it cannot prove.

Reading the plan (all into one small typed tree, ``PlanNode`` / ``PlanExpr``)
    * classic Spark: ``queryExecution().analyzed().toJSON()`` (a pre-order list of nodes, each with
      ``class`` and ``num-children``; expressions and subquery plans are nested likewise) -> ``tree_from_json``;
      if that fails, the plan object is walked over py4j (``tree_from_jvm``). Spark's own
      ``analyzed.deterministic()`` is recorded on the root and must be true as well.
    * Spark Connect (no plan objects on the client): the analyzed section of ``EXPLAIN EXTENDED``
      text -> ``tree_from_explain``. Only function names are visible there, so that path is coarser
      (see below) but uses the same tables and the same analysis.
    The splits at a view's top operator (``aggregate_split``; the top-k split in ``mvsink.spark.topk``) also
    need expression ids (not in the EXPLAIN text) and a Window's PARTITION BY, a Sort's directions and a
    limit's value (read from the JSON only); where a path lacks them, the split fails closed.

The analysis (``nonlinear_reason(tree, source)``; the source is the temp view ``View (`source`)``)
    1. Whole plan, including subquery plans and CTE definitions, in this order of report:
       a subquery operator or expression (ScalarSubquery, Exists, ListQuery/InSubquery, LateralSubquery,
       LateralJoin, OuterReference i.e. correlation) -> not linear in any source;
       an operator not in the tables below -> not linear, naming it;
       an expression class not in the tables below -> not linear, naming it;
       a user-defined function (its determinism is only a promise) -> not linear;
       a nondeterministic expression, including ones that depend on the clock, the session or the
       Spark version (rand, uuid, current_timestamp, current_user, version, aes_encrypt ...) -> not linear.
    2. The source must be read exactly once (a temp view matched by name, case-insensitively).
    3. From that read up to the root, each operator must be linear in the input the path comes from:
       Project, Filter, SubqueryAlias, View, Union (bag union; UNION DISTINCT is a Distinct above it),
       Generate, Sort, Repartition, RepartitionByExpression, RebalancePartitions, ResolvedHint,
       PipeOperator, WithCTE; a CTERelationDef continues from its one CTERelationRef (a CTE over the
       source read twice is not linear); Join: Inner and Cross always, LeftOuter/LeftSemi/LeftAnti with
       the source on the left, RightOuter with the source on the right. Anything else on the path
       (Aggregate, Distinct, Deduplicate, Window, Expand, Intersect, Except, limits, Sample ...) -> not linear.
       The expressions of those operators must all be row-level; a Generate's generator must be a known one.
    4. Off the path, the other inputs are evaluated again in every change term, so they must give the
       same rows each time: a GlobalLimit/LocalLimit/Offset/Tail/Sample anywhere -> not linear.

The rule for expressions (an allow-list of class names, never a deny-list)
    Every expression class is looked up by its simple class name in fixed tables:
    ROW (deterministic, computed from one row: attributes, literals, arithmetic, comparisons, casts,
    string/date/math/collection/JSON functions, CASE, coalesce, lambdas ...), AGGREGATE and WINDOW
    (allowed only in Aggregate/Window operators, i.e. never on the source's path), GENERATOR (only as
    a Generate's generator), SUBQUERY, NONDETERMINISTIC and UDF (never). A class in no table is
    *unknown* and fails closed with its name in the reason: nothing is taken as row-level just because
    it is not an aggregate. A new Spark function therefore costs a full diff until it is added to ROW.

    On the EXPLAIN text path an expression is identified by the function names it prints
    (``upper(``, ``max(``, ``scalar-subquery#``, ``outer(`` ...), mapped to the same classes; operators
    printed as symbols (``+``, ``=``, ``AND``, ``CASE WHEN``, ``IN``) are all row-level. Attribute
    names defined by ``AS`` or by a relation are blanked first, so a column named ``max(x)`` is not read
    as a call. A name the table does not know fails closed, so a string literal that looks like a call
    (``'f(x)'``) makes the text path say "not linear": stricter, never laxer.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import re
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

log = logging.getLogger(__name__)


class PlanFormatError(ValueError):
    """The plan (JSON or text) is not in the shape this module reads."""


# ---------------------------------------------------------------- the tree


@dataclasses.dataclass(frozen=True, eq=False)
class PlanExpr:
    """An expression: its class's simple name (``Multiply``), children, and plans of a subquery expression."""

    name: str
    children: tuple[PlanExpr, ...] = ()
    plans: tuple[PlanNode, ...] = ()
    # (name, expression id) of an AttributeReference or an Alias; None where the plan did not say
    # (the EXPLAIN text path never does).
    ref: tuple[str, int] | None = None
    # Read from the plan JSON only (the py4j and EXPLAIN paths leave it empty, so what needs it fails closed):
    # a SortOrder's ``descending`` and ``nulls_first``, a Literal's ``value`` (as printed) and ``type``.
    attrs: Mapping[str, Any] = dataclasses.field(default_factory=dict)

    def walk(self) -> Iterator[PlanExpr]:
        yield self
        for c in self.children:
            yield from c.walk()


@dataclasses.dataclass(frozen=True, eq=False)
class PlanNode:
    """A logical operator: simple class name, children (in Spark's order), expressions, and a few attributes.

    ``attrs``: ``view`` (a View's table name), ``join_type`` (``LeftOuter`` ...), ``cte_id``
    (CTERelationDef/CTERelationRef), ``deterministic`` (root only, classic Spark's own verdict).
    """

    name: str
    children: tuple[PlanNode, ...] = ()
    expressions: tuple[PlanExpr, ...] = ()
    attrs: Mapping[str, Any] = dataclasses.field(default_factory=dict)

    def walk(self) -> Iterator[PlanNode]:
        """Every operator in pre-order, subquery plans (inside expressions) included."""
        yield self
        for e in self.expressions:
            for x in e.walk():
                for p in x.plans:
                    yield from p.walk()
        for c in self.children:
            yield from c.walk()

    def all_expressions(self) -> Iterator[PlanExpr]:
        for e in self.expressions:
            yield from e.walk()


# ---------------------------------------------------------------- operator tables

LINEAR_OPERATORS = frozenset(
    {
        "Project",
        "Filter",
        "SubqueryAlias",
        "View",
        "Union",
        "Generate",
        "Sort",
        "Repartition",
        "RepartitionByExpression",
        "RebalancePartitions",
        "ResolvedHint",
        "PipeOperator",
        "WithCTE",
    }
)
JOIN_OPERATORS = frozenset({"Join"})
CTE_DEF, CTE_REF = "CTERelationDef", "CTERelationRef"
LEAF_OPERATORS = frozenset(
    {
        "LogicalRelation",
        "Relation",
        "LogicalRDD",
        "LocalRelation",
        "OneRowRelation",
        "Range",
        CTE_REF,
    }
)
# Known, deterministic, and not linear in their input.
NONLINEAR_OPERATORS = frozenset({"Aggregate", "Distinct", "Deduplicate", "Window", "Expand", "Intersect", "Except"})
# Known and not linear; besides, they may return different rows each time they are evaluated.
UNSTABLE_OPERATORS = frozenset({"GlobalLimit", "LocalLimit", "Limit", "Offset", "Tail", "Sample"})
SUBQUERY_OPERATORS = frozenset({"LateralJoin"})
KNOWN_OPERATORS = (
    LINEAR_OPERATORS
    | JOIN_OPERATORS
    | LEAF_OPERATORS
    | NONLINEAR_OPERATORS
    | UNSTABLE_OPERATORS
    | SUBQUERY_OPERATORS
    | {CTE_DEF}
)

_LEFT_PRESERVING = frozenset({"LeftOuter", "LeftSemi", "LeftAnti"})
_BOTH_SIDES = frozenset({"Inner", "Cross"})

# ---------------------------------------------------------------- expression tables
# "Class" or "Class:sql,names" (the lowercase names EXPLAIN prints for it, for the text path).

ROW, AGGREGATE, WINDOW, GENERATOR, SUBQUERY, NONDETERMINISTIC, UDF = (
    "row-level",
    "aggregate",
    "window",
    "generator",
    "subquery",
    "nondeterministic",
    "user-defined",
)

_TABLES: dict[str, str] = {
    ROW: """
    AttributeReference Alias Literal TypedNullLiteral SortOrder Cast:cast,try_cast,decimal,varchar,time
    Add Subtract Multiply Divide Remainder IntegralDivide Pmod:pmod,mod UnaryMinus:negative UnaryPositive:positive
    Abs:abs EqualTo EqualNullSafe LessThan LessThanOrEqual GreaterThan GreaterThanOrEqual And Or Not In InSet
    IsNull:isnull IsNotNull:isnotnull IsNaN:isnan Between:between CaseWhen If:if Coalesce:coalesce Nvl:nvl,ifnull
    Nvl2:nvl2 NullIf:nullif EqualNull:equal_null NullIfZero:nullifzero ZeroIfNull:zeroifnull
    KnownNotNull:knownnotnull KnownNullable:knownnullable KnownFloatingPointNormalized:knownfloatingpointnormalized
    NormalizeNaNAndZero With CommonExpressionDef CommonExpressionRef
    BitwiseAnd BitwiseOr BitwiseXor BitwiseNot BitwiseCount:bit_count BitwiseGet:bit_get,getbit
    ShiftLeft:shiftleft ShiftRight:shiftright ShiftRightUnsigned:shiftrightunsigned
    GetStructField GetArrayItem GetMapValue GetArrayStructFields ElementAt:element_at TryElementAt:try_element_at
    Get:get CreateArray:array CreateMap:map CreateNamedStruct:named_struct,struct
    LambdaFunction:lambdafunction NamedLambdaVariable:namedlambdavariable
    Upper:upper,ucase Lower:lower,lcase Length:length,char_length,character_length,len BitLength:bit_length
    OctetLength:octet_length StringTrim:trim StringTrimLeft:ltrim StringTrimRight:rtrim StringTrimBoth:btrim
    Substring:substring,substr SubstringIndex:substring_index Left:left Right:right Concat:concat
    ConcatWs:concat_ws StringReplace:replace RegExpReplace:regexp_replace RegExpExtract:regexp_extract
    RegExpExtractAll:regexp_extract_all RLike:rlike,regexp_like,regexp Like:like ILike:ilike
    StringSplit:split SplitPart:split_part StringLPad:lpad StringRPad:rpad InitCap:initcap Reverse:reverse
    StringRepeat:repeat StringInstr:instr StringLocate:locate,position StartsWith:startswith EndsWith:endswith
    Contains:contains StringTranslate:translate FormatString:format_string,printf Md5:md5 Sha1:sha1,sha
    Sha2:sha2 Crc32:crc32 Murmur3Hash:hash XxHash64:xxhash64 Base64:base64 UnBase64:unbase64 Hex:hex
    Unhex:unhex Ascii:ascii Chr:chr,char FormatNumber:format_number ToNumber:to_number Elt:elt Overlay:overlay
    SoundEx:soundex Levenshtein:levenshtein Encode:encode Decode:decode StringDecode Collate:collate
    ResolvedCollation Collation:collation StringSpace:space UrlEncode:url_encode UrlDecode:url_decode
    ParseUrl:parse_url
    Round:round BRound:bround Floor:floor Ceil:ceil,ceiling RoundFloor RoundCeil Sqrt:sqrt Exp:exp Log:ln
    Logarithm:log Log10:log10 Log2:log2 Log1p:log1p Expm1:expm1 Pow:pow,power Signum:sign,signum
    Greatest:greatest Least:least Rint:rint Cbrt:cbrt ToDegrees:degrees ToRadians:radians Sin:sin Cos:cos
    Tan:tan Asin:asin Acos:acos Atan:atan Atan2:atan2 Sinh:sinh Cosh:cosh Tanh:tanh EulerNumber:e Pi:pi
    WidthBucket:width_bucket TryDivide:try_divide TryAdd:try_add TryMultiply:try_multiply
    TrySubtract:try_subtract Bin:bin Conv:conv Factorial:factorial Hypot:hypot
    ParseToDate:to_date ParseToTimestamp:to_timestamp GetTimestamp DateFormatClass:date_format Year:year
    Month:month DayOfMonth:day,dayofmonth DayOfWeek:dayofweek DayOfYear:dayofyear WeekOfYear:weekofyear
    WeekDay:weekday DayName:dayname Quarter:quarter Hour:hour Minute:minute Second:second DateAdd:date_add
    DateSub:date_sub DateDiff:datediff,date_diff AddMonths:add_months MonthsBetween:months_between
    LastDay:last_day NextDay:next_day TruncDate:trunc TruncTimestamp:date_trunc UnixTimestamp:unix_timestamp
    FromUnixTime:from_unixtime ToUnixTimestamp:to_unix_timestamp UnixSeconds:unix_seconds
    UnixMillis:unix_millis UnixMicros:unix_micros UnixDate:unix_date SecondsToTimestamp:timestamp_seconds
    MillisToTimestamp:timestamp_millis MicrosToTimestamp:timestamp_micros DateFromUnixDate:date_from_unix_date
    MakeDate:make_date MakeTimestamp:make_timestamp MakeInterval:make_interval Extract:extract
    DatePart:date_part FromUTCTimestamp:from_utc_timestamp ToUTCTimestamp:to_utc_timestamp
    ExtractANSIIntervalDays:extractansiintervaldays TimestampAdd:timestampadd TimestampAddInterval
    TimestampDiff:timestampdiff DateAddInterval SubtractTimestamps SubtractDates
    ToCharacter:to_char,to_varchar PreciseTimestampConversion:precisetimestampconversion
    Size:size,cardinality ArrayContains:array_contains ArrayDistinct:array_distinct ArraySort:array_sort
    SortArray:sort_array ArrayJoin:array_join ArrayMax:array_max ArrayMin:array_min
    ArrayPosition:array_position ArrayRemove:array_remove ArrayUnion:array_union
    ArrayIntersect:array_intersect ArrayExcept:array_except ArraysZip:arrays_zip Flatten:flatten Slice:slice
    Sequence:sequence ArrayTransform:transform ArrayFilter:filter ArrayExists:exists ArrayForAll:forall
    ArrayAggregate:aggregate,reduce ZipWith:zip_with MapFromArrays:map_from_arrays MapFilter:map_filter
    TransformValues:transform_values TransformKeys:transform_keys MapConcat:map_concat MapEntries:map_entries
    MapKeys:map_keys MapValues:map_values MapContainsKey:map_contains_key MapFromEntries:map_from_entries
    ArrayAppend:array_append ArrayCompact:array_compact ArraySize:array_size ArraysOverlap:arrays_overlap
    ArrayRepeat:array_repeat StringToMap:str_to_map ArrayInsert:array_insert ArrayPrepend:array_prepend
    StructsToJson:to_json JsonToStructs:from_json GetJsonObject:get_json_object
    LengthOfJsonArray:json_array_length JsonObjectKeys:json_object_keys SchemaOfJson:schema_of_json
    StructsToCsv:to_csv CsvToStructs:from_csv ParseJson:parse_json VariantGet:variant_get,try_variant_get
    TypeOf:typeof AssertTrue:assert_true RaiseError:raise_error
    """,
    AGGREGATE: """
    AggregateExpression Count:count Sum:sum,try_sum Average:avg,mean,try_avg Min:min Max:max
    First:first,first_value Last:last,last_value CollectList:collect_list,array_agg CollectSet:collect_set
    StddevSamp:stddev,stddev_samp,std StddevPop:stddev_pop VarianceSamp:variance,var_samp VariancePop:var_pop
    HyperLogLogPlusPlus:approx_count_distinct ApproximatePercentile:percentile_approx,approx_percentile
    Percentile:percentile Median:median CountIf:count_if BoolAnd:bool_and,every BoolOr:bool_or,any,some
    MaxBy:max_by MinBy:min_by AnyValue:any_value Corr:corr CovPopulation:covar_pop CovSample:covar_samp
    Kurtosis:kurtosis Skewness:skewness ListAgg:listagg,string_agg BitAndAgg:bit_and BitOrAgg:bit_or
    BitXorAgg:bit_xor Mode:mode PivotFirst:pivotfirst Grouping:grouping GroupingID:grouping_id
    """,
    WINDOW: """
    WindowExpression WindowSpecDefinition:windowspecdefinition SpecifiedWindowFrame:specifiedwindowframe
    UnspecifiedFrame$ CurrentRow$:currentrow$ UnboundedPreceding$:unboundedpreceding$
    UnboundedFollowing$:unboundedfollowing$ RowNumber:row_number Rank:rank DenseRank:dense_rank
    PercentRank:percent_rank CumeDist:cume_dist NTile:ntile Lag:lag Lead:lead NthValue:nth_value
    """,
    GENERATOR: """
    Explode:explode,explode_outer PosExplode:posexplode,posexplode_outer Inline:inline,inline_outer
    Stack:stack JsonTuple:json_tuple
    """,
    SUBQUERY: """
    ScalarSubquery Exists ListQuery InSubquery LateralSubquery OuterReference:outer OuterScopeReference
    FunctionTableSubqueryArgumentExpression DynamicPruningSubquery LateralColumnAliasReference
    """,
    NONDETERMINISTIC: """
    Rand:rand,random Randn:randn Uuid:uuid Shuffle:shuffle MonotonicallyIncreasingID:monotonically_increasing_id
    SparkPartitionID:spark_partition_id InputFileName:input_file_name InputFileBlockStart:input_file_block_start
    InputFileBlockLength:input_file_block_length CallMethodViaReflection:reflect,java_method
    TryReflect:try_reflect Uniform:uniform RandStr:randstr CurrentDate:current_date,curdate
    CurrentTimestamp:current_timestamp Now:now LocalTimestamp:localtimestamp CurrentTime:current_time
    CurrentTimeZone:current_timezone CurrentUser:current_user,user,session_user
    CurrentDatabase:current_database,current_schema CurrentCatalog:current_catalog SparkVersion:version
    AesEncrypt:aes_encrypt
    """,
    UDF: """
    ScalaUDF PythonUDF ScalaUDAF PythonUDAF PythonUDTF ScalaAggregator UserDefinedGenerator
    HiveGenericUDF HiveSimpleUDF HiveUDAFFunction HiveGenericUDTF
    """,
}


def _load_tables() -> tuple[dict[str, str], dict[str, str]]:
    category: dict[str, str] = {}
    by_sql: dict[str, str] = {}
    for cat, text in _TABLES.items():
        for item in text.split():
            cls, _, names = item.partition(":")
            assert cls not in category, cls
            category[cls] = cat
            for n in filter(None, names.split(",")):
                assert n not in by_sql, n
                by_sql[n] = cls
    return category, by_sql


EXPRESSION_CATEGORY, _CLASS_OF_SQL_NAME = _load_tables()


def expression_category(name: str) -> str | None:
    """ROW, AGGREGATE, WINDOW, GENERATOR, SUBQUERY, NONDETERMINISTIC, UDF, or None for a class this module does not know."""
    return EXPRESSION_CATEGORY.get(name)


# ---------------------------------------------------------------- the analysis


def nonlinear_reason(tree: PlanNode, source: str) -> str | None:
    """Why the plan is not linear in temp view ``source`` (None: it is)."""
    why = _whole_plan_reason(tree)
    if why:
        return why
    parents: dict[int, tuple[PlanNode, int]] = {}  # id(node) -> (parent, index of node among its children)
    refs: dict[str, list[PlanNode]] = {}
    for node in tree.walk():
        for i, c in enumerate(node.children):
            parents[id(c)] = (node, i)
        if node.name == CTE_REF:
            refs.setdefault(str(node.attrs.get("cte_id")), []).append(node)
    want = source.casefold()
    hits = [n for n in tree.walk() if n.name == "View" and str(n.attrs.get("view") or "").casefold() == want]
    if len(hits) != 1:
        return f"source {source!r} is read {len(hits)} times" if hits else f"source {source!r} is not read"
    node = hits[0]
    while id(node) in parents:
        parent, index = parents[id(node)]
        if parent.name == CTE_DEF:  # continue from the one place the CTE is used
            uses = refs.get(str(parent.attrs.get("cte_id")), [])
            if len(uses) != 1:
                return f"a CTE over {source!r} is read {len(uses)} times"
            node = uses[0]
            continue
        why = _step_reason(parent, index, source)
        if why:
            return why
        node = parent
    if node is not tree:  # a subquery plan's root: cannot happen once subqueries are refused
        return f"{source!r} is read somewhere this check cannot follow"
    for n in tree.walk():
        if n.name in UNSTABLE_OPERATORS:
            return f"{_a(n.name)} may return different rows each time it is evaluated"
    return None


def _whole_plan_reason(tree: PlanNode) -> str | None:
    nodes = list(tree.walk())
    found: dict[str, list[str]] = {}
    for n in nodes:
        if n.name in SUBQUERY_OPERATORS:
            found.setdefault(SUBQUERY, []).append(n.name)
        elif n.name not in KNOWN_OPERATORS:
            found.setdefault("operator", []).append(n.name)
        for e in n.all_expressions():
            cat = expression_category(e.name)
            found.setdefault(cat or "expression", []).append(e.name)
    if found.get(SUBQUERY):
        return f"the query has a subquery ({found[SUBQUERY][0]})"
    if found.get("operator"):
        return f"the plan has an operator this check does not know: {found['operator'][0]}"
    if found.get("expression"):
        return f"the query has an expression this check does not know: {found['expression'][0]}"
    if found.get(UDF):
        return f"the query calls a user-defined function ({found[UDF][0]}), not known to be deterministic"
    if found.get(NONDETERMINISTIC):
        return (
            f"the query has an expression that is not deterministic or depends on the time or session "
            f"({found[NONDETERMINISTIC][0]})"
        )
    if tree.attrs.get("deterministic") is False:
        return "the query is not deterministic (Spark's analyzed plan says so)"
    return None


def _a(word: str) -> str:
    """``word`` with its indefinite article: "an Aggregate", "an aggregate", "a Window", "a Union"."""
    w = word.lower()
    vowel = w[:1] in ("a", "e", "i", "o") or (w.startswith("u") and not w.startswith(("uni", "use", "usi")))
    return f"{'an' if vowel else 'a'} {word}"


def _step_reason(op: PlanNode, index: int, source: str) -> str | None:
    """Why operator ``op`` is not linear in its ``index``-th child, which carries ``source``."""
    if op.name in JOIN_OPERATORS:
        kind = str(op.attrs.get("join_type"))
        side = "left" if index == 0 else "right"
        ok = (
            kind in _BOTH_SIDES
            or (kind in _LEFT_PRESERVING and side == "left")
            or (kind == "RightOuter" and side == "right")
        )
        if not ok:
            return f"{source!r} is on the {side} side of a {kind} join"
    elif op.name not in LINEAR_OPERATORS:
        return f"{_a(op.name)} is computed over {source!r}"
    for k, e in enumerate(op.expressions):
        for x in e.walk():
            cat = expression_category(x.name)
            if cat == ROW or (cat == GENERATOR and op.name == "Generate" and x is e and k == 0):
                continue
            return f"{_a(cat or 'unknown')} expression ({x.name}) in {_a(op.name)} is computed over {source!r}"
    return None


# ---------------------------------------------------------------- splitting at the top aggregate, DISTINCT or window

# Operators that may sit above the top aggregate, DISTINCT or window of a view refreshed by affected groups.
# Each acts on one row at a time: a Project may drop or rename columns, a Filter (HAVING, ``rn <= k``) may
# drop rows. So a group's rows of the view depend only on the group's rows of C.
_ABOVE_AGGREGATE = frozenset({"Project", "Sort", "SubqueryAlias", "Filter"})
# Operators whose output columns are their (only) child's (the same expression ids).
_SAME_COLUMNS = frozenset({"SubqueryAlias", "Filter", "Sort", "Distinct", "View"})


@dataclasses.dataclass(frozen=True)
class AggregateSplit:
    """A plan ``[Project/Sort/SubqueryAlias/Filter]* -> P -> C`` split at P, an operator that computes each
    group of C's rows on its own: an Aggregate (groups: its grouping keys), a Distinct (all its columns) or a
    Window (its PARTITION BY).

    ``key_positions``: for each key, the position of a column of the view's output that is that key
    unchanged (a plain column, possibly renamed); ``keys``: the keys' names below P; ``input``: C;
    ``kind``: P's name; ``chain``: the names of the operators above P, top first.
    """

    key_positions: tuple[int, ...]
    keys: tuple[str, ...]
    input: PlanNode
    kind: str = "Aggregate"
    chain: tuple[str, ...] = ()


def aggregate_split(tree: PlanNode) -> AggregateSplit | str:
    """Split the plan at its top aggregate, DISTINCT or window, or say why it cannot be (failing closed)."""
    chain: list[PlanNode] = []
    node = tree
    while node.name in _ABOVE_AGGREGATE:
        if len(node.children) != 1:
            return f"{_a(node.name)} above the aggregate has {len(node.children)} inputs"
        chain.append(node)
        node = node.children[0]
    if len(node.children) != 1:
        return f"the query's top operator is not an aggregate, DISTINCT or window ({node.name})"
    got = _split_keys(node)
    if isinstance(got, str):
        return got
    keys, base = got
    key_ids: dict[int, int] = {}  # expression id of a key -> its index
    for i, e in enumerate(keys):
        if e.name != "AttributeReference" or e.ref is None:
            return f"grouping key #{i + 1} is an expression ({e.name}), not a column"
        key_ids.setdefault(e.ref[1], i)
    cols = _output_columns(base, key_ids, chain)
    if isinstance(cols, str):
        return cols
    positions = []
    for i, e in enumerate(keys):
        at = [p for p, (_, k) in enumerate(cols) if k == i]
        if not at:
            return f"grouping key {e.ref[0] if e.ref else '#' + str(i + 1)!r} is not a column of the view"
        positions.append(at[0])
    return AggregateSplit(
        tuple(positions),
        tuple(e.ref[0] if e.ref else "" for e in keys),
        node.children[0],
        node.name,
        tuple(n.name for n in chain),
    )


def _split_keys(node: PlanNode) -> tuple[list[PlanExpr], list[PlanExpr] | None] | str:
    """(P's keys, P's output list, None when P passes its input's columns through), or why P is no split point."""
    if node.name == "Aggregate":
        if "grouping" not in node.attrs or "aggregates" not in node.attrs:
            return "the aggregate's grouping keys could not be read"
        g0, g1 = node.attrs["grouping"]
        a0, a1 = node.attrs["aggregates"]
        if g0 == g1:
            return "a global aggregate (no GROUP BY)"
        return list(node.expressions[g0:g1]), list(node.expressions[a0:a1])
    if node.name == "Distinct":  # its keys are its input's columns, and so is its output
        refs = output_refs(node.children[0])
        if refs is None:
            return "the columns of the DISTINCT's input could not be read"
        columns = [PlanExpr("AttributeReference", ref=r) for r in refs]
        return columns, columns
    if node.name == "Window":
        if "partition" not in node.attrs:
            return "the window's PARTITION BY could not be read"
        p0, p1 = node.attrs["partition"]
        if p0 == p1:
            return "a window over all rows (no PARTITION BY)"
        return list(node.expressions[p0:p1]), None  # its input's columns, then the window functions
    return f"the query's top operator is not an aggregate, DISTINCT or window ({node.name})"


def output_refs(node: PlanNode) -> list[tuple[str, int]] | None:
    """(name, expression id) of each output column of ``node``, where the plan says them plainly (else None)."""
    items: tuple[PlanExpr, ...] | None = None
    if node.name == "Project" and "list" in node.attrs:
        items = node.expressions[node.attrs["list"][0] : node.attrs["list"][1]]
    elif node.name == "Aggregate" and "aggregates" in node.attrs:
        items = node.expressions[node.attrs["aggregates"][0] : node.attrs["aggregates"][1]]
    elif node.name == "Union" and node.children:  # a union's columns are its first input's
        return output_refs(node.children[0])
    elif node.name in _SAME_COLUMNS and len(node.children) == 1:
        return output_refs(node.children[0])
    if items is None or any(e.ref is None for e in items):
        return None
    return [e.ref for e in items if e.ref is not None]


def _output_columns(
    base: list[PlanExpr] | None, key_ids: Mapping[int, int | None], chain: list[PlanNode]
) -> list[tuple[int, int | None]] | str:
    """The view's columns as (expression id, index of the key the column is, or None), or why not.

    ``base``: the output list of the operator below ``chain`` (None: it passes the keys' columns through
    under their own ids, e.g. a Window, so only a projection above says where they are). Follows it up
    through the projections in ``chain`` (top first), bottom-up.
    """
    cols: list[tuple[int, int | None]] | None = None
    if base is not None:
        out = [_passes(e, key_ids) for e in base]
        if any(o is None for o in out):
            return "an output column of the aggregate could not be read"
        cols = [o for o in out if o is not None]
    for op in reversed(chain):
        if op.name != "Project":
            continue
        if "list" not in op.attrs:
            return "a projection above the aggregate could not be read"
        l0, l1 = op.attrs["list"]
        known = key_ids if cols is None else {i: k for i, k in cols}
        projected = [_passes(e, known) for e in op.expressions[l0:l1]]
        if any(o is None for o in projected):
            return "a column of a projection above the aggregate could not be read"
        cols = [o for o in projected if o is not None]
    if cols is None:
        return "the view's columns could not be read (no projection above the window)"
    return cols


def _passes(e: PlanExpr, key_of: Mapping[int, int | None]) -> tuple[int, int | None] | None:
    """(expression id of the column ``e`` makes, the key it is unchanged) -- None if ``e`` cannot be read."""
    if e.ref is None:
        return None
    if e.name == "AttributeReference":
        return e.ref[1], key_of.get(e.ref[1])
    # an Alias: a column renamed is still the key; anything computed is not
    child = e.children[0] if len(e.children) == 1 else None
    if child is not None and child.name == "AttributeReference" and child.ref is not None:
        return e.ref[1], key_of.get(child.ref[1])
    return e.ref[1], None


def groups_reason(tree: PlanNode, sources: list[str]) -> AggregateSplit | str:
    """The split when the view can be refreshed by affected groups over changes of ``sources``, else why not.

    The whole plan must pass the checks of :func:`nonlinear_reason` (no subquery, UDF, unknown or
    nondeterministic expression anywhere), and the input C must be linear in every source.
    """
    why = _whole_plan_reason(tree)
    if why:
        return why
    split = aggregate_split(tree)
    if isinstance(split, str):
        return split
    for s in sources:
        why = nonlinear_reason(split.input, s)
        if why:
            return f"the aggregate's input is not linear in {s!r}: {why}"
    return split


# ---------------------------------------------------------------- JSON (classic Spark)


def tree_from_json(doc: str | list[Any]) -> PlanNode:
    """The tree of a plan's ``toJSON()`` output."""
    nodes = json.loads(doc) if isinstance(doc, str) else doc
    if not isinstance(nodes, list) or not nodes:
        raise PlanFormatError("the plan JSON is not a non-empty list")
    root, end = _json_plan(nodes, 0)
    if end != len(nodes):
        raise PlanFormatError(f"the plan JSON has {len(nodes) - end} node(s) after its root's subtree")
    return root


def _simple(cls: str) -> str:
    return cls.rsplit(".", 1)[-1]


def _node_at(nodes: list[Any], i: int) -> tuple[str, int, dict[str, Any]]:
    if i >= len(nodes):
        raise PlanFormatError("the plan JSON ends inside a subtree")
    n = nodes[i]
    if not isinstance(n, dict) or not isinstance(n.get("class"), str) or not isinstance(n.get("num-children"), int):
        raise PlanFormatError(f"plan JSON node {i} has no class or num-children")
    return n["class"], n["num-children"], n


def _is_plan_class(cls: str) -> bool:
    name = _simple(cls)
    if name in KNOWN_OPERATORS:
        return True
    return name not in EXPRESSION_CATEGORY and (".plans.logical." in cls or ".sql.execution." in cls)


# Fields that must hold expressions when the operator is read (a null there means the JSON lost them).
_REQUIRED_EXPRESSIONS = {
    "Project": ("projectList",),
    "Filter": ("condition",),
    "Generate": ("generator",),
    "Sort": ("order",),
    "Aggregate": ("groupingExpressions", "aggregateExpressions"),
    "Window": ("windowExpressions",),
}


def _json_plan(nodes: list[Any], i: int) -> tuple[PlanNode, int]:
    cls, k, n = _node_at(nodes, i)
    if not _is_plan_class(cls):
        raise PlanFormatError(f"expected an operator at plan JSON node {i}, found {cls}")
    j = i + 1
    children = []
    for _ in range(k):
        child, j = _json_plan(nodes, j)
        children.append(child)
    name = _simple(cls)
    exprs: list[PlanExpr] = []
    spans: dict[str, tuple[int, int]] = {}
    for key, value in n.items():
        if key not in ("class", "num-children"):
            start = len(exprs)
            _collect_json(value, exprs)
            spans[key] = (start, len(exprs))
    for key in _REQUIRED_EXPRESSIONS.get(name, ()):
        if not isinstance(n.get(key), list):
            raise PlanFormatError(f"the plan JSON lost the {key} of a {name}")
    attrs: dict[str, Any] = {"class": cls}
    if name == "Aggregate":
        attrs["grouping"] = spans["groupingExpressions"]
        attrs["aggregates"] = spans["aggregateExpressions"]
    elif name == "Project":
        attrs["list"] = spans["projectList"]
    elif name == "Window" and "partitionSpec" in spans:
        attrs["windows"] = spans["windowExpressions"]
        attrs["partition"] = spans["partitionSpec"]
    elif name == "Sort":
        attrs["order"] = spans["order"]
        attrs["global"] = n.get("global") is True
    if name == "View":
        ident = (n.get("desc") or {}).get("identifier") or {}
        attrs["view"] = ident.get("table")
        attrs["temp"] = n.get("isTempView")
    elif name == "Join":
        jt = n.get("joinType") or {}
        attrs["join_type"] = _simple(str(jt.get("object") or jt.get("product-class") or "?")).rstrip("$")
    elif name == CTE_DEF:
        attrs["cte_id"] = str(n.get("id"))
    elif name == CTE_REF:
        attrs["cte_id"] = str(n.get("cteId"))
    return PlanNode(name, tuple(children), tuple(exprs), attrs), j


def _collect_json(value: Any, out: list[PlanExpr]) -> None:
    """Expression trees nested anywhere in a field's JSON value (plans there become a PlanExpr holding them)."""
    if isinstance(value, list):
        if value and all(_is_tree_node(x) for x in value):
            out.append(_json_tree(value))
        else:
            for x in value:
                _collect_json(x, out)
    elif isinstance(value, dict):
        if _is_tree_node(value):
            out.append(_json_tree([value]))
        else:
            for x in value.values():
                _collect_json(x, out)


def _is_tree_node(x: Any) -> bool:
    """A serialized TreeNode (a user-defined type's JSON also has a "class", but no "num-children")."""
    return isinstance(x, dict) and "class" in x and "num-children" in x


def _json_tree(nodes: list[Any]) -> PlanExpr:
    cls = nodes[0]["class"]
    if _is_plan_class(cls):  # a plan where an expression was expected: keep it, under a name no table knows
        plan = tree_from_json(nodes)
        return PlanExpr(f"plan field ({plan.name})", plans=(plan,))
    expr, end = _json_expr(nodes, 0)
    if end != len(nodes):
        raise PlanFormatError(f"an expression in the plan JSON has {len(nodes) - end} node(s) after its root's subtree")
    return expr


def _json_expr(nodes: list[Any], i: int) -> tuple[PlanExpr, int]:
    cls, k, n = _node_at(nodes, i)
    j = i + 1
    children = []
    for _ in range(k):
        child, j = _json_expr(nodes, j)
        children.append(child)
    plans: list[PlanNode] = []
    nested: list[PlanExpr] = []
    for key, value in n.items():
        if key in ("class", "num-children"):
            continue
        if (
            isinstance(value, list)
            and value
            and all(_is_tree_node(x) for x in value)
            and _is_plan_class(value[0]["class"])
        ):
            plans.append(tree_from_json(value))  # a subquery expression's plan
        else:
            _collect_json(value, nested)  # e.g. OuterReference.e, CaseWhen branches (again)
    ref = None
    expr_id = n.get("exprId")
    if _simple(cls) in _NAMED and isinstance(expr_id, dict) and isinstance(expr_id.get("id"), int):
        ref = (str(n.get("name")), int(expr_id["id"]))
    return PlanExpr(_simple(cls), tuple(children + nested), tuple(plans), ref, _json_expr_attrs(_simple(cls), n)), j


def _json_expr_attrs(name: str, n: dict[str, Any]) -> dict[str, Any]:
    """What the top-k split needs of a SortOrder or a Literal (anything it does not recognise is left out)."""
    out: dict[str, Any] = {}
    if name == "SortOrder":
        direction = str((n.get("direction") or {}).get("object") or "")
        nulls = str((n.get("nullOrdering") or {}).get("object") or "")
        if direction.endswith(("Ascending$", "Descending$")) and nulls.endswith(("NullsFirst$", "NullsLast$")):
            out["descending"] = direction.endswith("Descending$")
            out["nulls_first"] = nulls.endswith("NullsFirst$")
    elif name == "Literal" and isinstance(n.get("dataType"), str):
        out["value"], out["type"] = n.get("value"), n["dataType"]
    return out


_NAMED = frozenset({"AttributeReference", "Alias"})


# ---------------------------------------------------------------- the plan object over py4j (classic fallback)


def _seq(s: Any) -> list[Any]:
    return [s.apply(i) for i in range(s.size())]


def tree_from_jvm(plan: Any) -> PlanNode:
    """The tree of a JVM ``LogicalPlan``, walked over py4j (slower than the JSON; its fallback)."""
    name = str(plan.getClass().getSimpleName())
    children = tuple(tree_from_jvm(c) for c in _seq(plan.children()))
    exprs = tuple(_jvm_expr(e) for e in _seq(plan.expressions()))
    attrs: dict[str, Any] = {"class": str(plan.getClass().getName())}
    if name == "Aggregate":  # expressions(): the grouping expressions, then the aggregate expressions
        g = int(plan.groupingExpressions().size())
        attrs["grouping"], attrs["aggregates"] = (0, g), (g, len(exprs))
    elif name == "Project":
        attrs["list"] = (0, len(exprs))
    if name == "View":
        attrs["view"] = str(plan.desc().identifier().table())
        attrs["temp"] = bool(plan.isTempView())
    elif name == "Join":
        attrs["join_type"] = str(plan.joinType().getClass().getSimpleName()).rstrip("$")
    elif name == CTE_DEF:
        attrs["cte_id"] = str(plan.id())
    elif name == CTE_REF:
        attrs["cte_id"] = str(plan.cteId())
    return PlanNode(name, children, exprs, attrs)


def _jvm_expr(e: Any) -> PlanExpr:
    name = str(e.getClass().getSimpleName())
    children = tuple(_jvm_expr(c) for c in _seq(e.children()))
    plans: tuple[PlanNode, ...] = ()
    if expression_category(name) == SUBQUERY:
        try:  # ScalarSubquery, Exists, ListQuery ... carry a plan; InSubquery, OuterReference do not
            plan = e.plan()
        except Exception:
            plan = None  # the expression is a subquery either way: not linear
        if plan is not None:
            plans = (tree_from_jvm(plan),)
    ref = (str(e.name()), int(e.exprId().id())) if name in _NAMED else None
    return PlanExpr(name, children, plans, ref)


# ---------------------------------------------------------------- EXPLAIN EXTENDED text (Spark Connect)

ANALYZED = "== Analyzed Logical Plan =="
_PREFIX_RE = re.compile(r"^((?:[: ] {2})*)([:+]- )?")
_NAME_RE = re.compile(r"^[A-Za-z_][\w$]*")
_ATTR_ID_RE = re.compile(r"#(\d+)L?")
_MARKER_RE = re.compile(r"([A-Za-z][\w-]*)#\d+")
_CALL_RE = re.compile(r"(?<![\w$.#`])([A-Za-z_][\w$]*)\(")
_VIEW_RE = re.compile(r"^\((`(?:[^`]|``)*`(?:\.`(?:[^`]|``)*`)*),")
# Nodes whose line lists the attributes they define (besides every "... AS name#id").
_DEFINING = LEAF_OPERATORS | {"View", "Generate", "Expand"}
# Scala/type names printed inside arguments, not expressions: Some(UTC), StructField(a,IntegerType,true) ...
_TEXT_NOISE = frozenset({"Some", "StructField", "StructType", "ArrayType", "MapType", "DecimalType"})
_TEXT_MARKERS = {
    "scalar-subquery": "ScalarSubquery",
    "exists": "Exists",
    "list": "ListQuery",
    "lateral-subquery": "LateralSubquery",
    "dynamicpruning": "DynamicPruningSubquery",
}


def tree_from_explain(text: str) -> PlanNode:
    """The tree of the analyzed plan in ``EXPLAIN EXTENDED`` output (or of a bare plan tree string)."""
    if ANALYZED in text:
        section = text.split(ANALYZED, 1)[1].split("== Optimized Logical Plan ==", 1)[0]
        lines = section.lstrip("\n").split("\n")[1:]  # first: the output schema
    else:
        lines = text.split("\n")
    lines = [ln for ln in lines if ln.strip()]
    if not lines:
        raise PlanFormatError("the plan text is empty")
    parsed: list[tuple[int, str, str]] = []  # (depth, name, arguments)
    for ln in lines:
        m = _PREFIX_RE.match(ln)
        assert m is not None
        depth = len(m.group(1)) // 3 + (1 if m.group(2) else 0)
        body = ln[m.end() :]
        nm = _NAME_RE.match(body)
        if nm is None:
            raise PlanFormatError(f"the plan text has a line this parser does not read: {body[:80]!r}")
        parsed.append((depth, nm.group(0), body[nm.end() :].strip()))
    defined = _defined_ids(parsed)

    # Each entry: depth, name, args, children, inner plans (subquery plans printed 2 levels deeper, before children).
    class _Building:
        def __init__(self, depth: int, name: str, args: str) -> None:
            self.depth, self.name, self.args = depth, name, args
            self.children: list[_Building] = []
            self.inner: list[_Building] = []

    stack: list[_Building] = []
    root: _Building | None = None
    for depth, name, args in parsed:
        b = _Building(depth, name, args)
        while stack and stack[-1].depth >= depth:
            stack.pop()
        if not stack:
            if root is not None or depth != 0:
                raise PlanFormatError("the plan text has more than one root")
            root = b
        elif stack[-1].depth == depth - 1:
            stack[-1].children.append(b)
        elif stack[-1].depth == depth - 2 and not stack[-1].children:
            stack[-1].inner.append(b)
        else:
            raise PlanFormatError(f"the plan text has a shape this parser does not read at {name}")
        stack.append(b)
    assert root is not None

    def build(b: _Building) -> PlanNode:
        exprs = list(_text_expressions(b.args, defined))
        inner = [build(x) for x in b.inner]
        subqueries = [k for k, e in enumerate(exprs) if e.name in _TEXT_MARKERS.values()]
        for k, plan in zip(subqueries, inner):  # subquery plans, in the order their markers are printed
            exprs[k] = PlanExpr(exprs[k].name, plans=(plan,))
        for plan in inner[len(subqueries) :]:
            exprs.append(PlanExpr(f"unmatched subquery plan ({plan.name})", plans=(plan,)))
        return PlanNode(b.name, tuple(build(c) for c in b.children), tuple(exprs), _text_attrs(b.name, b.args))

    return build(root)


def _name_start(s: str, hash_at: int) -> int:
    """Start of the attribute name that ends just before ``s[hash_at] == '#'`` (names may hold balanced parens)."""
    j, depth = hash_at - 1, 0
    while j >= 0:
        c = s[j]
        if c == ")":
            depth += 1
        elif c == "(":
            if depth == 0:
                break
            depth -= 1
        elif depth == 0 and c in " ,[":
            break
        j -= 1
    return j + 1


def _defined_ids(parsed: list[tuple[int, str, str]]) -> set[str]:
    ids: set[str] = set()
    for _, name, args in parsed:
        for m in _ATTR_ID_RE.finditer(args):
            start = _name_start(args, m.start())
            if name in _DEFINING or args[:start].endswith(" AS "):
                ids.add(m.group(1))
    return ids


def _text_expressions(args: str, defined: set[str]) -> tuple[PlanExpr, ...]:
    s = args
    for m in reversed(list(_ATTR_ID_RE.finditer(s))):  # blank attributes (their names may look like calls)
        if m.group(1) in defined:
            s = s[: _name_start(s, m.start())] + "ATTR" + s[m.end() :]
    out: list[PlanExpr] = []
    for m in _MARKER_RE.finditer(s):
        word = m.group(1)
        if word in _TEXT_MARKERS:
            out.append(PlanExpr(_TEXT_MARKERS[word]))
    for m in _ATTR_ID_RE.finditer(s):  # an undefined "f(...)#12": a UDF result or something unknown
        start = _name_start(s, m.start())
        word = s[start : m.start()]
        if "(" in word:
            out.append(PlanExpr(f"{word.split('(', 1)[0]}(...)#"))
    for m in _CALL_RE.finditer(s):
        word = m.group(1)
        if word in _TEXT_NOISE:
            continue
        out.append(PlanExpr(_CLASS_OF_SQL_NAME.get(word.lower(), f"{word}(...)")))
    return tuple(out)


def _text_attrs(name: str, args: str) -> dict[str, Any]:
    attrs: dict[str, Any] = {}
    if name == "View":
        m = _VIEW_RE.match(args)
        if m:
            parts = re.findall(r"`((?:[^`]|``)*)`", m.group(1))
            attrs["view"] = parts[-1].replace("``", "`")
    elif name == "Join":
        attrs["join_type"] = args.split(",", 1)[0].strip()
    elif name in (CTE_DEF, CTE_REF):
        attrs["cte_id"] = args.split(",", 1)[0].strip()
    return attrs


# ---------------------------------------------------------------- reading a query's plan


def _is_remote(obj: Any) -> bool:
    return type(obj).__module__.startswith("pyspark.sql.connect")


def tree_of_dataframe(df: DataFrame) -> PlanNode:
    """The analyzed plan of a classic DataFrame: its JSON, else the plan object walked over py4j."""
    analyzed = df._jdf.queryExecution().analyzed()
    try:
        tree = tree_from_json(str(analyzed.toJSON()))
    except Exception as json_exc:  # a plan whose JSON Spark cannot write, or that this module cannot read
        log.debug("reading the analyzed plan object over py4j: its JSON failed (%s)", json_exc)
        try:
            tree = tree_from_jvm(analyzed)
        except Exception as jvm_exc:
            raise PlanFormatError(
                f"neither its JSON ({json_exc}) nor the plan object ({jvm_exc}) could be read"
            ) from jvm_exc
    attrs = dict(tree.attrs)
    attrs["deterministic"] = bool(analyzed.deterministic())
    return dataclasses.replace(tree, attrs=attrs)


def plan_tree(spark: SparkSession, query: str, *, desired: DataFrame | None = None) -> PlanNode:
    """The analyzed plan of ``query`` (or of ``desired``, the query already analysed) as a tree."""
    if not _is_remote(spark) and (desired is None or not _is_remote(desired)):
        return tree_of_dataframe(desired if desired is not None else spark.sql(query))
    text = spark.sql("EXPLAIN EXTENDED " + query).collect()[0][0]
    if ANALYZED not in text:
        raise PlanFormatError("EXPLAIN returned no analyzed plan")
    return tree_from_explain(text)


def linearity(
    spark: SparkSession, query: str, sources: list[str], *, desired: DataFrame | None = None
) -> dict[str, str | None]:
    """For each source: None if the query is linear in it, else why not.

    Classic Spark reads the analyzed plan of ``desired`` (or analyses ``query``; nothing runs);
    Spark Connect runs ``EXPLAIN EXTENDED`` (it has no plan objects on the client).
    """
    try:
        tree = plan_tree(spark, query, desired=desired)
    except PlanFormatError as exc:
        return {s: f"the plan could not be read: {exc}" for s in sources}
    return {s: nonlinear_reason(tree, s) for s in sources}


def aggregate_keys(
    spark: SparkSession, query: str, sources: list[str], *, desired: DataFrame | None = None
) -> tuple[list[str], AggregateSplit] | str:
    """The view's output columns that are its groups' keys (and the split), or why the view cannot be
    refreshed by affected groups over changes of ``sources``."""
    try:
        tree = plan_tree(spark, query, desired=desired)
    except PlanFormatError as exc:
        return f"the plan could not be read: {exc}"
    split = groups_reason(tree, sources)
    if isinstance(split, str):
        return split
    columns = (desired if desired is not None else spark.sql(query)).columns
    if len(set(columns)) != len(columns):
        return "the view has two columns of the same name"
    return [columns[p] for p in split.key_positions], split
