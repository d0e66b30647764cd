"""The analysed plan of a Spark Connect DataFrame, from mvsink's plugin in the Connect server.

A Spark Connect client holds no plan objects. The server that ``mvsink connect-server`` starts (and ``make
airflow``, docker-compose) registers mvsink's relation plugin (``spark_jobs/connect``, built by ``make install``):
the client sends the relation it wants analysed inside a ``Relation.extension`` of type
:data:`TYPE_URL`, and the server answers one row with the analysed plan's ``toJSON()`` and its
``deterministic`` flag — what a classic session reads over py4j. So both kinds of session take their plan
facts (types, join keys, determinism, linearity, the splits) from the same JSON.

A server without the plugin (someone's own) answers "no handler"; :func:`analyzed_plan` then returns None
(remembered per server, logged once) and the caller falls back to the EXPLAIN text.
"""

from __future__ import annotations

import functools
import logging
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

log = logging.getLogger(__name__)

#: The types of the ``google.protobuf.Any`` the plugin answers (spark_jobs/connect: AnalyzedPlanRelation).
TYPE_URL = "type.googleapis.com/mvsink.AnalyzedPlan"
STRIP_TYPE_URL = "type.googleapis.com/mvsink.StripOperators"
#: The start of the plugin's message when a plan's top is not the chain of operators expected.
NOT_THE_CHAIN = "mvsink: the plan's operator"
#: What a server says of an extension no plugin handles (Spark's InvalidPlanInput).
NO_HANDLER = "No handler found for extension"

#: Servers (their client's endpoint) known to lack the plugin in this process.
_WITHOUT_PLUGIN: set[str] = set()


def _server(df: DataFrame) -> str:
    client = cast(Any, df.sparkSession).client
    builder = getattr(client, "_builder", None)
    return str(getattr(builder, "endpoint", None) or id(client))


def analyzed_plan(df: DataFrame) -> tuple[str, bool] | None:
    """``(plan JSON, deterministic)`` of a Spark Connect DataFrame's analysed plan, or None when its server has no
    mvsink plugin. Nothing runs: the server only analyses the query. A query that does not analyse raises
    Spark's own error, as ``df.schema`` would."""
    from mvsink.core.deltalog import cached_snapshot

    # within a write step one round trip per DataFrame (validation and the modes ask about the same query); the
    # entry holds the DataFrame, so its id is not reused while the entry lives
    return cached_snapshot(("analyzed", id(df)), lambda: (df, _ask(df)))[1]


def _ask(df: DataFrame) -> tuple[str, bool] | None:
    from pyspark.errors.exceptions.connect import SparkConnectGrpcException
    from pyspark.sql.connect.dataframe import DataFrame as ConnectFrame

    server = _server(df)
    if server in _WITHOUT_PLUGIN:
        return None
    session = df.sparkSession
    try:
        rows = ConnectFrame(_plan_class()(TYPE_URL, _relation(df)), session).collect()  # type: ignore[arg-type]
    except SparkConnectGrpcException as exc:
        if NO_HANDLER not in str(exc):
            raise
        _WITHOUT_PLUGIN.add(server)
        log.info(
            "the Spark Connect server %s has no mvsink plugin: plan facts come from EXPLAIN text (coarser; "
            "start it with `mvsink connect-server` after `make install` for the same facts as a classic session)",
            server,
        )
        return None
    (row,) = rows
    return str(row[0]), bool(row[1])


def has_plan(df: DataFrame) -> bool:
    """Whether ``df``'s analysed plan can be read as a classic session reads it: always in a classic session; over
    Spark Connect where the server has mvsink's plugin."""
    from mvsink.spark.session import is_connect

    return not is_connect(df) or analyzed_plan(df) is not None


def strip_operators(df: DataFrame, chain: tuple[str, ...], drop: frozenset[int]) -> DataFrame:
    """``df`` without the operators at depths ``drop`` of ``chain`` (operator names from its analysed plan's root
    down), built by the server's plugin: what :func:`mvsink.incremental.groups.strip_operators` does over py4j.
    Raises ValueError when the plan's top is not ``chain``; needs the plugin (:func:`has_plan`)."""
    from pyspark.errors.exceptions.connect import SparkConnectGrpcException
    from pyspark.sql.connect.dataframe import DataFrame as ConnectFrame

    header = ",".join(chain) + ";" + ",".join(str(d) for d in sorted(drop)) + "\n"
    stripped = ConnectFrame(
        _plan_class()(STRIP_TYPE_URL, header.encode() + _relation(df)),
        df.sparkSession,  # type: ignore[arg-type]
    )
    try:
        _ = stripped.schema  # analysed now: a plan whose top is not the chain fails here, as over py4j
    except SparkConnectGrpcException as exc:
        if NOT_THE_CHAIN in str(exc):
            raise ValueError(str(exc).split("\n")[0]) from None
        raise
    return stripped


def _relation(df: DataFrame) -> bytes:
    frame = cast(Any, df)
    return bytes(frame._plan.plan(frame.sparkSession.client).SerializeToString())


@functools.cache
def _plan_class() -> type:
    """The relation class (made on first use: pyspark's Connect client is imported only over Connect)."""
    from pyspark.sql.connect.plan import LogicalPlan

    class PluginRelation(LogicalPlan):
        """A relation the plugin answers: ``payload`` in a ``Relation.extension`` of type ``type_url``."""

        def __init__(self, type_url: str, payload: bytes) -> None:
            super().__init__(None)
            self._type_url, self._payload = type_url, payload

        def plan(self, session: Any) -> Any:
            rel = self._create_proto_relation()
            rel.extension.type_url = self._type_url
            rel.extension.value = self._payload
            return rel

    return PluginRelation
