"""Reading a query's analysed plan into the tree of :mod:`mvsink.plan.tree`.

Reading the plan (all into one small typed tree, ``PlanNode`` / ``PlanExpr``)
    * classic Spark: ``queryExecution().analyzed().toJSON()`` (a pre-order list of nodes, each with
      ``class`` and ``num-children``; expressions and subquery plans are nested likewise) -> ``tree_from_json``;
      if that fails, the plan object is walked over py4j (``tree_from_jvm``). Spark's own
      ``analyzed.deterministic()`` is recorded on the root and must be true as well.
    * Spark Connect (no plan objects on the client): the same JSON and flag from mvsink's plugin in the Connect
      server (:mod:`mvsink.spark.connectplan`) -> ``tree_from_json``: the same tree as a classic session's.
      A server without the plugin: the analyzed section of ``EXPLAIN EXTENDED`` text -> ``tree_from_explain``.
      Only function names are visible there, so that path is coarser (see below) but uses the same tables and
      the same analysis.
    The splits at a view's top operator (``aggregate_split``; the top-k split in ``mvsink.incremental.topk``) also
    need expression ids (not in the EXPLAIN text) and a Window's PARTITION BY, a Sort's directions and a
    limit's value (read from the JSON only); where a path lacks them, the split fails closed.

"""

from __future__ import annotations

import dataclasses
import json
import logging
import re
from typing import TYPE_CHECKING, Any

from mvsink.core.deltalog import cached_snapshot
from mvsink.plan.tree import (
    CLASS_OF_SQL_NAME,
    CTE_DEF,
    CTE_REF,
    EXPRESSION_CATEGORY,
    KNOWN_OPERATORS,
    LEAF_OPERATORS,
    SUBQUERY,
    PlanExpr,
    PlanFormatError,
    PlanNode,
    expression_category,
)
from mvsink.spark.session import is_connect

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

log = logging.getLogger(__name__)


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
    elif name == "AggregateExpression" and isinstance(n.get("isDistinct"), bool):
        out["distinct"] = n["isDistinct"]  # (what mvsink.engines.duckdbsql checks)
    elif name in ("AttributeReference", "Cast") and isinstance(n.get("dataType"), str):
        out["type"] = n["dataType"]  # (what mvsink.incremental.duckdbterms checks)
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
        attrs = _text_attrs(b.name, b.args)
        _add_text_refs(b.name, b.args, exprs, attrs)
        return PlanNode(b.name, tuple(build(c) for c in b.children), tuple(exprs), attrs)

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
        out.append(PlanExpr(CLASS_OF_SQL_NAME.get(word.lower(), f"{word}(...)")))
    return tuple(out)


# What the join-key analysis (plan/joinkeys.py) reads of the EXPLAIN text: attribute references ``name#id``
# in a View's output, a Project's list, an Aggregate's lists and the equality conjuncts of a Join's or a
# Filter's condition. Anything else gives no reference (no edge: the source is read whole).
_TEXT_ATTR_RE = re.compile(r"^([A-Za-z_][\w$]*)#(\d+)L?$")
_TEXT_ALIAS_RE = re.compile(r"^(.*) AS ([A-Za-z_][\w$]*)#(\d+)L?$")


def _split_top(text: str, sep: str) -> list[str]:
    """``text`` split at ``sep`` outside parentheses, brackets and quotes."""
    out, depth, start, i, quote = [], 0, 0, 0, ""
    while i < len(text):
        c = text[i]
        if quote:
            if c == quote:
                quote = ""
        elif c in "'`":
            quote = c
        elif c in "([":
            depth += 1
        elif c in ")]":
            depth -= 1
        elif depth == 0 and text.startswith(sep, i):
            out.append(text[start:i].strip())
            i += len(sep)
            start = i
            continue
        i += 1
    out.append(text[start:].strip())
    return out


def _unwrap(text: str) -> str:
    """``text`` without parentheses that enclose all of it."""
    t = text.strip()
    while t.startswith("(") and t.endswith(")") and _balanced(t[1:-1]):
        t = t[1:-1].strip()
    return t


def _balanced(t: str) -> bool:
    depth = 0
    for c in t:
        depth += c == "("
        depth -= c == ")"
        if depth < 0:
            return False
    return depth == 0


def _text_conjuncts(cond: str) -> list[str]:
    """The conjuncts of a printed condition, nested ANDs flattened."""
    parts = _split_top(_unwrap(cond), " AND ")
    if len(parts) == 1:
        return parts
    return [c for p in parts for c in _text_conjuncts(p)]


def _text_attr(item: str) -> PlanExpr | None:
    m = _TEXT_ATTR_RE.match(item.strip())
    return PlanExpr("AttributeReference", ref=(m.group(1), int(m.group(2)))) if m else None


def _text_named(item: str) -> PlanExpr | None:
    """An item of a Project's or an Aggregate's list: ``a#1`` or ``<expr> AS b#2`` (children only for an attribute)."""
    attr = _text_attr(item)
    if attr is not None:
        return attr
    m = _TEXT_ALIAS_RE.match(item.strip())
    if not m:
        return None
    inner = _text_attr(_unwrap(m.group(1)))
    return PlanExpr("Alias", children=(inner,) if inner else (), ref=(m.group(2), int(m.group(3))))


def _text_list(text: str) -> list[str]:
    t = text.strip()
    if not (t.startswith("[") and t.endswith("]")):
        return []
    return [x for x in _split_top(t[1:-1], ",") if x]


def _add_text_refs(name: str, args: str, exprs: list[PlanExpr], attrs: dict[str, Any]) -> None:
    """Append the references of ``_TEXT_ATTR_RE``'s kind to ``exprs`` and their spans to ``attrs`` — under keys of
    their own (``text_list``, ``text_grouping``, ``text_aggregates``, ``output``, ``condition``) that only the
    join-key analysis reads: the other analyses need what the text does not say, and keep failing closed."""
    if name == "View":
        parts = _split_top(args.strip()[1:-1] if args.strip().startswith("(") else args, ",")
        out = [_text_attr(x) for x in _text_list(parts[1] if len(parts) > 1 else "")]
        attrs["output"] = [(e.ref[0], e.ref[1]) for e in out if e is not None and e.ref is not None]
    elif name == "Project":
        items = [_text_named(x) for x in _text_list(args)]
        if items and all(i is not None for i in items):
            attrs["text_list"] = (len(exprs), len(exprs) + len(items))
            exprs.extend(i for i in items if i is not None)
    elif name == "Aggregate":
        lists = _split_top(args, ", [")
        if len(lists) == 2:
            grouping = [_text_attr(x) for x in _text_list(lists[0])]
            aggregates = [_text_named(x) for x in _text_list("[" + lists[1])]
            start = len(exprs)
            attrs["text_grouping"] = (start, start + len([g for g in grouping if g is not None]))
            exprs.extend(g for g in grouping if g is not None)
            mid = len(exprs)
            exprs.extend(a for a in aggregates if a is not None)
            attrs["text_aggregates"] = (mid, len(exprs))
    elif name in ("Join", "Filter"):
        cond = args.split(",", 1)[1] if name == "Join" and "," in args else ("" if name == "Join" else args)
        equalities = []
        for conj in _text_conjuncts(cond) if cond.strip() else []:
            sides = _split_top(_unwrap(conj), " = ")
            if len(sides) == 2:
                a, b = _text_attr(_unwrap(sides[0])), _text_attr(_unwrap(sides[1]))
                if a is not None and b is not None:
                    equalities.append(PlanExpr("EqualTo", children=(a, b)))
        if equalities:
            attrs["condition"] = len(exprs)
            exprs.append(PlanExpr("And", children=tuple(equalities)))


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


def tree_of_dataframe(df: DataFrame) -> PlanNode:
    """The analyzed plan of a classic DataFrame: its JSON, else the plan object walked over py4j."""
    analyzed = df._jdf.queryExecution().analyzed()
    return _tree_of_analyzed(str(analyzed.toJSON()), bool(analyzed.deterministic()), fallback=lambda: analyzed)


def _tree_of_analyzed(doc: str, deterministic: bool, *, fallback: Any = None) -> PlanNode:
    """The tree of an analysed plan's JSON, with Spark's ``deterministic`` on its root; if the JSON cannot be read
    and ``fallback()`` gives the plan object (classic Spark), that object walked over py4j."""
    try:
        tree = tree_from_json(doc)
    except Exception as json_exc:  # a plan whose JSON Spark cannot write, or that this module cannot read
        if fallback is None:
            raise PlanFormatError(f"its JSON could not be read ({json_exc})") from json_exc
        log.debug("reading the analyzed plan object over py4j: its JSON failed (%s)", json_exc)
        try:
            tree = tree_from_jvm(fallback())
        except Exception as jvm_exc:
            raise PlanFormatError(
                f"neither its JSON ({json_exc}) nor the plan object ({jvm_exc}) could be read"
            ) from jvm_exc
    attrs = dict(tree.attrs)
    attrs["deterministic"] = deterministic
    return dataclasses.replace(tree, attrs=attrs)


def connect_tree(df: DataFrame) -> PlanNode | None:
    """The analysed plan of a Spark Connect DataFrame as the classic path reads it (its JSON, from mvsink's server
    plugin: :mod:`mvsink.spark.connectplan`), or None where the server has no plugin."""
    from mvsink.spark.connectplan import analyzed_plan

    got = analyzed_plan(df)
    return None if got is None else _tree_of_analyzed(*got)


def plan_tree(spark: SparkSession, query: str, *, desired: DataFrame | None = None) -> PlanNode:
    """The analyzed plan of ``query`` (or of ``desired``, the query already analysed) as a tree.

    Within a write step an analysed DataFrame's plan is read once (a mode's ``applies`` and its ``run`` both ask).
    The cache entry holds the DataFrame itself, so its id is not reused while the entry lives. Over Spark Connect
    the tree comes from the server's plugin, else (a server without it) from the EXPLAIN text.
    """
    connect = is_connect(spark) or (desired is not None and is_connect(desired))
    if not connect:
        if desired is None:
            return tree_of_dataframe(spark.sql(query))
        df = desired
        return cached_snapshot(("plan", id(df)), lambda: (df, tree_of_dataframe(df)))[1]
    frame = desired if desired is not None else spark.sql(query)
    tree = cached_snapshot(("plan", id(frame)), lambda: (frame, connect_tree(frame)))[1]
    if tree is not None:
        return tree
    text = spark.sql("EXPLAIN EXTENDED " + query).collect()[0][0]
    if ANALYZED not in text:
        raise PlanFormatError("EXPLAIN returned no analyzed plan")
    return tree_from_explain(text)
