"""The analysed plan as a small typed tree (``PlanNode`` / ``PlanExpr``), and the tables of the operators and
expression classes the plan analysis knows (:mod:`mvsink.plan.linearity`, :mod:`mvsink.plan.splits`).

The parsers that build the tree from Spark's plan are :mod:`mvsink.plan.read`.

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
from collections.abc import Iterator, Mapping
from typing import Any


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
    DateAddYMInterval TimestampAddYMInterval DatetimeSub TimeAdd MultiplyYMInterval MultiplyDTInterval
    DivideYMInterval DivideDTInterval MultiplyInterval:multiply_interval DivideInterval:divide_interval
    MakeYMInterval:make_ym_interval
    MakeDTInterval:make_dt_interval TryMakeInterval:try_make_interval ExtractANSIIntervalYears
    ExtractANSIIntervalMonths ExtractANSIIntervalHours ExtractANSIIntervalMinutes ExtractANSIIntervalSeconds
    ExtractIntervalYears ExtractIntervalMonths ExtractIntervalDays ExtractIntervalHours ExtractIntervalMinutes
    ExtractIntervalSeconds TryEval
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
    MaxBy:max_by MinBy:min_by MaxMinByK AnyValue:any_value Corr:corr CovPopulation:covar_pop CovSample:covar_samp
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


EXPRESSION_CATEGORY, CLASS_OF_SQL_NAME = _load_tables()


def expression_category(name: str) -> str | None:
    """ROW, AGGREGATE, WINDOW, GENERATOR, SUBQUERY, NONDETERMINISTIC, UDF, or None for a class this module does not know."""
    return EXPRESSION_CATEGORY.get(name)


def query_operators(tree: PlanNode) -> Iterator[PlanNode]:
    """The operators of the query itself, its subqueries' included, in pre-order: not those inside a View (a
    source's own definition, as a view source's consolidated rows: its GROUP BY with a SUM is not the query's)."""
    yield tree
    if tree.name == "View":
        return
    for e in tree.expressions:
        for x in e.walk():
            for p in x.plans:
                yield from query_operators(p)
    for c in tree.children:
        yield from query_operators(c)


def is_correlated(e: PlanExpr) -> bool:
    """Does the subquery expression ``e`` refer to its outer row (an OuterReference in its plan's own operators)?"""
    return any(
        x.name == "OuterReference" for p in e.plans for n in p.walk() for ex in n.all_expressions() for x in ex.walk()
    )
