/*
 * A Spark Connect relation plugin: the analysed plan of a client's relation, as the classic session's
 * `queryExecution().analyzed()` gives it.
 *
 * A Spark Connect client holds no plan objects; mvsink reads the facts it takes from a query's analysed plan
 * (column types, join keys, determinism, linearity) from the plan's JSON (`TreeNode.toJSON`). Over Connect it
 * sends the relation it wants analysed, packed in a `google.protobuf.Any` of type
 * `type.googleapis.com/mvsink.AnalyzedPlan` inside a `Relation.extension`; this plugin analyses it in the
 * client's server-side session (its temporary views included) and answers with one row:
 * `plan_json STRING` (the analysed plan's `toJSON()`) and `deterministic BOOLEAN` (`analyzed.deterministic`).
 * Nothing is executed. Any other extension is not ours: `Optional.empty()` lets other plugins take it.
 *
 * Of type `type.googleapis.com/mvsink.StripOperators` it answers the client's relation with some operators of
 * its analysed plan's top taken out, as a classic session does over py4j (mvsink.incremental.groups
 * `strip_operators`): the payload is one UTF-8 line `Name,Name,...;depth,depth` (the operators expected from
 * the root down, then the depths to drop), a newline, then the relation. An operator that is not the one
 * expected fails the request with a message starting "mvsink: the plan's operator".
 *
 * Built by `make install` against pyspark's own jars into `.jars/mvsink-connect-plugin.jar`; `mvsink
 * connect-server` registers it (`spark.connect.extensions.relation.classes`) when that jar is present.
 */
package mvsink.connect;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.HashSet;
import java.util.List;
import java.util.Optional;
import java.util.Set;
import org.apache.spark.connect.proto.Relation;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.classic.Dataset;
import org.apache.spark.sql.classic.SparkSession;
import org.apache.spark.sql.connect.planner.SparkConnectPlanner;
import org.apache.spark.sql.connect.plugin.RelationPlugin;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;
import org.sparkproject.connect.protobuf.Any;
import org.sparkproject.connect.protobuf.InvalidProtocolBufferException;
import scala.jdk.javaapi.CollectionConverters;

public final class AnalyzedPlanRelation implements RelationPlugin {
  public static final String TYPE_URL = "type.googleapis.com/mvsink.AnalyzedPlan";
  public static final String STRIP_TYPE_URL = "type.googleapis.com/mvsink.StripOperators";

  private static final StructType SCHEMA =
      new StructType()
          .add("plan_json", DataTypes.StringType, false)
          .add("deterministic", DataTypes.BooleanType, false);

  @Override
  public Optional<LogicalPlan> transform(byte[] extension, SparkConnectPlanner planner) {
    Any any;
    try {
      any = Any.parseFrom(extension);
    } catch (InvalidProtocolBufferException e) {
      return Optional.empty();
    }
    if (STRIP_TYPE_URL.equals(any.getTypeUrl())) {
      return Optional.of(strip(any.getValue().toByteArray(), planner));
    }
    if (!TYPE_URL.equals(any.getTypeUrl())) {
      return Optional.empty();
    }
    SparkSession session = planner.session();
    LogicalPlan analyzed = analyze(any.getValue().toByteArray(), planner);
    Row row = RowFactory.create(analyzed.toJSON(), analyzed.deterministic());
    return Optional.of(session.createDataFrame(Collections.singletonList(row), SCHEMA).logicalPlan());
  }

  private static LogicalPlan analyze(byte[] relation, SparkConnectPlanner planner) {
    Relation input;
    try {
      input = Relation.parseFrom(relation);
    } catch (InvalidProtocolBufferException e) {
      throw new IllegalArgumentException("mvsink: the payload is not a Spark Connect relation", e);
    }
    return Dataset.ofRows(planner.session(), planner.transformRelation(input))
        .queryExecution()
        .analyzed();
  }

  private static LogicalPlan strip(byte[] payload, SparkConnectPlanner planner) {
    int newline = 0;
    while (newline < payload.length && payload[newline] != '\n') {
      newline++;
    }
    if (newline == payload.length) {
      throw new IllegalArgumentException("mvsink: the StripOperators payload has no header line");
    }
    String[] header = new String(payload, 0, newline, StandardCharsets.UTF_8).split(";", -1);
    List<String> chain = header[0].isEmpty() ? List.of() : Arrays.asList(header[0].split(","));
    Set<Integer> drop = new HashSet<>();
    for (String d : header.length > 1 ? header[1].split(",") : new String[0]) {
      if (!d.isEmpty()) {
        drop.add(Integer.parseInt(d));
      }
    }
    LogicalPlan node =
        analyze(Arrays.copyOfRange(payload, newline + 1, payload.length), planner);
    List<LogicalPlan> path = new ArrayList<>();
    for (int depth = 0; depth < chain.size(); depth++) {
      String got = node.getClass().getSimpleName();
      if (!got.equals(chain.get(depth)) || node.children().size() != 1) {
        throw new IllegalArgumentException(
            "mvsink: the plan's operator at depth " + depth + " is " + got + ", not " + chain.get(depth));
      }
      path.add(node);
      node = node.children().apply(0);
    }
    for (int depth = chain.size() - 1; depth >= 0; depth--) {
      if (!drop.contains(depth)) {
        List<LogicalPlan> child = List.of(node);
        node = (LogicalPlan) path.get(depth).withNewChildren(CollectionConverters.asScala(child).toSeq());
      }
    }
    return node;
  }
}
