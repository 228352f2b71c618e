package streaming.dedup;

import java.sql.Timestamp;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Collections;
import java.util.Comparator;
import java.util.List;

import org.apache.spark.sql.Encoders;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.streaming.ExpiredTimerInfo;
import org.apache.spark.sql.streaming.OutputMode;
import org.apache.spark.sql.streaming.StatefulProcessorWithInitialState;
import org.apache.spark.sql.streaming.TTLConfig;
import org.apache.spark.sql.streaming.TimeMode;
import org.apache.spark.sql.streaming.TimerValues;
import org.apache.spark.sql.streaming.ValueState;

import scala.jdk.javaapi.CollectionConverters;

/**
 * Remembers one id for {@code horizonMs} of Kinesis arrival time, and forgets it
 * through an event-time timer.
 *
 * <p>Why a timer and not {@code dropDuplicatesWithinWatermark}: Spark's built-in
 * operator finds expired ids by scanning every id it holds, at the end of every
 * batch. Timers sit in an index ordered by time; Spark walks it only up to the
 * first timer the watermark has not passed, so a batch costs what it brings and
 * what expires, never what is held.
 *
 * <p>Why arrival time and not a processing-time TTL: the watermark moves with the
 * records, not with the clock. A job that stopped for hours and catches up sees
 * the original and its re-send as minutes apart, as they were.
 *
 * <p>State per id: one {@code Long}, the arrival millis its horizon ends at, and a
 * timer then. A row is a re-send, and dropped, when it arrived within the
 * horizon of the last occurrence that passed (compared on the rows' own arrival
 * times, so whether the timer already fired does not matter); of several rows
 * of one id in a batch the earliest arrival passes.
 *
 * <p>The initial state (a seed, the migration from the built-in operator in
 * docs/operate.md) is the arrival millis of an id already stored.
 */
public final class ArrivalDedupProcessor
    extends StatefulProcessorWithInitialState<String, Row, Row, Long> {

  private static final long serialVersionUID = 1L;

  private final int arrivalIndex;
  private final long horizonMs;
  private transient ValueState<Long> seen;

  public ArrivalDedupProcessor(int arrivalIndex, long horizonMs) {
    if (horizonMs <= 0) {
      throw new IllegalArgumentException("horizonMs must be > 0, got " + horizonMs);
    }
    this.arrivalIndex = arrivalIndex;
    this.horizonMs = horizonMs;
  }

  @Override
  public void init(OutputMode outputMode, TimeMode timeMode) {
    seen = getHandle().getValueState("seen", Encoders.LONG(), TTLConfig.NONE());
  }

  @Override
  public scala.collection.Iterator<Row> handleInputRows(
      String key, scala.collection.Iterator<Row> rows, TimerValues timerValues) {
    Row only = rows.next();
    Long stored = seen.get();
    if (!rows.hasNext()) { // the usual case: one row for the id in this batch
      long arrival = millis(only.get(arrivalIndex));
      if (stored != null && arrival <= stored) {
        return CollectionConverters.asScala(Collections.<Row>emptyIterator());
      }
      remember(arrival);
      return CollectionConverters.asScala(Collections.singletonList(only).iterator());
    }
    List<Row> all = new ArrayList<>();
    all.add(only);
    rows.foreach(all::add);
    all.sort(Comparator.comparingLong(row -> millis(row.get(arrivalIndex))));
    List<Row> out = new ArrayList<>(1);
    long expiresAt = stored == null ? Long.MIN_VALUE : stored;
    for (Row row : all) {
      long arrival = millis(row.get(arrivalIndex));
      if (arrival > expiresAt) {
        out.add(row);
        expiresAt = arrival + horizonMs;
      }
    }
    if (!out.isEmpty()) {
      seen.update(expiresAt);
      getHandle().registerTimer(expiresAt);
    }
    return CollectionConverters.asScala(out.iterator());
  }

  @Override
  public void handleInitialState(String key, Long arrivalMs, TimerValues timerValues) {
    Long stored = seen.get();
    if (stored == null || arrivalMs + horizonMs > stored) {
      remember(arrivalMs);
    }
  }

  /**
   * A timer fires after the batch's rows were handled: an id that arrived again
   * after its horizon (a new occurrence, with a later timer) keeps its state.
   */
  @Override
  public scala.collection.Iterator<Row> handleExpiredTimer(
      String key, TimerValues timerValues, ExpiredTimerInfo expiredTimerInfo) {
    Long stored = seen.get();
    if (stored == null || stored <= expiredTimerInfo.getExpiryTimeInMs()) {
      seen.clear();
    }
    return CollectionConverters.asScala(Collections.<Row>emptyIterator());
  }

  private void remember(long arrivalMs) {
    long expiresAt = arrivalMs + horizonMs;
    seen.update(expiresAt);
    getHandle().registerTimer(expiresAt);
  }

  /** Arrival time as epoch millis, whichever Java type the session maps timestamps to. */
  static long millis(Object value) {
    if (value instanceof Timestamp ts) {
      return ts.getTime();
    }
    if (value instanceof Instant instant) {
      return instant.toEpochMilli();
    }
    throw new IllegalArgumentException(
        "arrival time must be a timestamp, got " + (value == null ? "null" : value.getClass()));
  }
}
