package streaming.dedup;

import org.apache.spark.api.java.function.MapFunction;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Encoders;
import org.apache.spark.sql.KeyValueGroupedDataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.streaming.OutputMode;
import org.apache.spark.sql.streaming.TimeMode;
import org.apache.spark.sql.types.StructType;

/**
 * The entry points Python calls through the session's JVM gateway: a plain static
 * method per plan, so the Python side passes a Dataset and column names and gets a
 * Dataset back, with no Scala implicits to build.
 */
public final class ArrivalDedup {

  private ArrivalDedup() {}

  /** {@code input} de-duplicated on {@code keyColumn}; the frame must carry a
   * watermark on {@code arrivalColumn} (event-time timers follow it). */
  public static Dataset<Row> apply(
      Dataset<Row> input, String keyColumn, String arrivalColumn, long horizonMs) {
    StructType schema = input.schema();
    ArrivalDedupProcessor processor =
        new ArrivalDedupProcessor(schema.fieldIndex(arrivalColumn), horizonMs);
    return grouped(input, keyColumn)
        .transformWithState(processor, TimeMode.EventTime(), OutputMode.Append(),
            Encoders.row(schema));
  }

  /** The same, with ids already stored seeding the state on a new checkpoint:
   * {@code seed} has the key (string) and the arrival time (timestamp) columns. */
  public static Dataset<Row> applyWithSeed(
      Dataset<Row> input, String keyColumn, String arrivalColumn, long horizonMs,
      Dataset<Row> seed, String seedKeyColumn, String seedArrivalColumn) {
    StructType schema = input.schema();
    ArrivalDedupProcessor processor =
        new ArrivalDedupProcessor(schema.fieldIndex(arrivalColumn), horizonMs);
    int seedArrival = seed.schema().fieldIndex(seedArrivalColumn);
    KeyValueGroupedDataset<String, Long> initial =
        grouped(seed, seedKeyColumn)
            .mapValues(
                (MapFunction<Row, Long>) row -> ArrivalDedupProcessor.millis(row.get(seedArrival)),
                Encoders.LONG());
    return grouped(input, keyColumn)
        .transformWithState(processor, TimeMode.EventTime(), OutputMode.Append(), initial,
            Encoders.row(schema), Encoders.LONG());
  }

  /**
   * Grouped by a column, not by a function: {@code groupByKey(f)} would turn every
   * row into a {@code Row} once more just to call {@code f} (an
   * {@code AppendColumns} before the exchange); {@code groupBy(column).as(...)}
   * reads the key straight from the column.
   */
  private static KeyValueGroupedDataset<String, Row> grouped(Dataset<Row> frame, String column) {
    return frame.groupBy(column).as(Encoders.STRING(), Encoders.row(frame.schema()));
  }
}
