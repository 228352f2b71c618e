package streaming.dedup;

import org.apache.spark.api.java.function.MapFunction;
import org.apache.spark.sql.Column;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Encoder;
import org.apache.spark.sql.Encoders;
import org.apache.spark.sql.KeyValueGroupedDataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.functions;
import org.apache.spark.sql.streaming.OutputMode;
import org.apache.spark.sql.streaming.TimeMode;
import org.apache.spark.sql.types.StructType;

import scala.Tuple2;

/**
 * The entry points Python calls through the session's JVM gateway: a plain static
 * method per plan, so the Python side passes a Dataset and column names and gets a
 * Dataset back, with no Scala implicits to build.
 *
 * <p>The processor's grouping key is a bucket of ids, {@code pmod(hash(id), buckets)}
 * (Spark's Murmur3 {@code hash}, stable across releases: the state is keyed by it,
 * so {@code buckets} must stay what the checkpoint was made with).
 */
public final class ArrivalDedup {

  /** The bucket column, added before the exchange and dropped after the processor. */
  static final String BUCKET = "_dedup_bucket";

  private ArrivalDedup() {}

  /** The initial state's value: an id and its arrival millis. */
  private static final Encoder<Tuple2<String, Long>> SEED =
      Encoders.tuple(Encoders.STRING(), Encoders.LONG());

  /** {@code input} de-duplicated on {@code keyColumn}; the frame must carry a
   * watermark on {@code arrivalColumn} (event-time timers follow it). */
  public static Dataset<Row> apply(
      Dataset<Row> input, String keyColumn, String arrivalColumn, long horizonMs, int buckets) {
    Dataset<Row> bucketed = withBucket(input, keyColumn, buckets);
    StructType schema = bucketed.schema();
    return grouped(bucketed)
        .transformWithState(processor(schema, keyColumn, arrivalColumn, horizonMs),
            TimeMode.EventTime(), OutputMode.Append(), Encoders.row(schema))
        .drop(BUCKET);
  }

  /** The same, with ids already stored seeding the state on a new checkpoint:
   * {@code seed} has the key (string) and the arrival time (timestamp) columns. */
  public static Dataset<Row> applyWithSeed(
      Dataset<Row> input, String keyColumn, String arrivalColumn, long horizonMs, int buckets,
      Dataset<Row> seed, String seedKeyColumn, String seedArrivalColumn) {
    Dataset<Row> bucketed = withBucket(input, keyColumn, buckets);
    StructType schema = bucketed.schema();
    Dataset<Row> seeds = withBucket(
        seed.select(seed.col(seedKeyColumn), seed.col(seedArrivalColumn)), seedKeyColumn, buckets);
    KeyValueGroupedDataset<Integer, Tuple2<String, Long>> initial =
        grouped(seeds)
            .mapValues(
                (MapFunction<Row, Tuple2<String, Long>>) row ->
                    new Tuple2<>(row.getString(0), ArrivalDedupProcessor.millis(row.get(1))),
                SEED);
    return grouped(bucketed)
        .transformWithState(processor(schema, keyColumn, arrivalColumn, horizonMs),
            TimeMode.EventTime(), OutputMode.Append(), initial, Encoders.row(schema), SEED)
        .drop(BUCKET);
  }

  /** {@code frame} with its key's bucket, {@code pmod(hash(key), buckets)}, as {@link #BUCKET}. */
  private static Dataset<Row> withBucket(Dataset<Row> frame, String keyColumn, int buckets) {
    if (buckets <= 0) {
      throw new IllegalArgumentException("buckets must be > 0, got " + buckets);
    }
    Column bucket = functions.pmod(functions.hash(frame.col(keyColumn)), functions.lit(buckets));
    return frame.withColumn(BUCKET, bucket);
  }

  private static ArrivalDedupProcessor processor(
      StructType schema, String keyColumn, String arrivalColumn, long horizonMs) {
    return new ArrivalDedupProcessor(
        schema.fieldIndex(keyColumn), schema.fieldIndex(arrivalColumn), horizonMs);
  }

  /**
   * Grouped by a column, not by a function: {@code groupByKey(f)} would turn every
   * row into a {@code Row} once more just to call {@code f} (an
   * {@code AppendColumns} before the exchange); {@code groupBy(column).as(...)}
   * reads the key straight from the column.
   */
  private static KeyValueGroupedDataset<Integer, Row> grouped(Dataset<Row> frame) {
    return frame.groupBy(BUCKET).as(Encoders.INT(), Encoders.row(frame.schema()));
  }
}
