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
 * <p>State per id: a value, {@value #HORIZON_END} (the arrival millis its horizon
 * ends at), and one timer at that time. The value is what a row is checked
 * against: reading it is a point read, which RocksDB's bloom filters answer for
 * a new id without reading a data block, whatever the ids held. (Listing the
 * key's timers instead, with no value, is a prefix seek that the filters do not
 * serve: it read a data block per level of the store for every new id, and the
 * batch's state updates took 2.5-4x as long at 10 M ids as at none;
 * docs/sizing.md.) A row is a re-send, and dropped, when it arrived at or
 * before the held horizon end (compared on the rows' own arrival times, so
 * whether the timer already fired does not matter); of several rows of one id
 * in a batch the earliest arrival passes. An id that comes back after its
 * horizon moves its one timer, so the timer that fires is always the key's
 * last, and its callback clears the value without reading it.
 *
 * <p>The initial state (a seed, the migration from the built-in operator in
 * docs/operate.md) is the arrival millis of an id already stored.
 */
public final class ArrivalDedupProcessor
    extends StatefulProcessorWithInitialState<String, Row, Row, Long> {

  /** The value state's name; app/checkpoint_state.py refuses a checkpoint of
   * this processor's state without it (an earlier version kept timers only). */
  public static final String HORIZON_END = "horizonEnd";

  private static final long serialVersionUID = 1L;

  private final int arrivalIndex;
  private final long horizonMs;
  private transient ValueState<Long> horizonEnd;

  public ArrivalDedupProcessor(int arrivalIndex, long horizonMs) {
    if (horizonMs <= 0) {
      throw new IllegalArgumentException("horizonMs must be > 0, got " + horizonMs);
    }
    this.arrivalIndex = arrivalIndex;
    this.horizonMs = horizonMs;
  }

  @Override
  public void init(OutputMode outputMode, TimeMode timeMode) {
    horizonEnd = getHandle().getValueState(HORIZON_END, Encoders.LONG(), TTLConfig.NONE());
  }

  @Override
  public scala.collection.Iterator<Row> handleInputRows(
      String key, scala.collection.Iterator<Row> rows, TimerValues timerValues) {
    Row only = rows.next();
    Long held = horizonEnd.get();
    long end = held == null ? Long.MIN_VALUE : held;
    if (!rows.hasNext()) { // the usual case: one row for the id in this batch
      long arrival = millis(only.get(arrivalIndex));
      if (arrival <= end) {
        return CollectionConverters.asScala(Collections.<Row>emptyIterator());
      }
      remember(held, arrival + horizonMs);
      return CollectionConverters.asScala(Collections.singletonList(only).iterator());
    }
    List<Row> all = new ArrayList<>();
    all.add(only);
    rows.foreach(all::add);
    all.sort(Comparator.comparingLong(row -> millis(row.get(arrivalIndex))));
    List<Row> out = new ArrayList<>(1);
    for (Row row : all) {
      long arrival = millis(row.get(arrivalIndex));
      if (arrival > end) {
        out.add(row);
        end = arrival + horizonMs;
      }
    }
    if (!out.isEmpty()) { // the last horizon covers the earlier ones
      remember(held, end);
    }
    return CollectionConverters.asScala(out.iterator());
  }

  @Override
  public void handleInitialState(String key, Long arrivalMs, TimerValues timerValues) {
    Long held = horizonEnd.get();
    long end = arrivalMs + horizonMs;
    if (held == null || end > held) {
      remember(held, end);
    }
  }

  /** The key's one timer, replacing the one at {@code held} (null: none). */
  private void remember(Long held, long end) {
    if (held != null) {
      getHandle().deleteTimer(held);
    }
    getHandle().registerTimer(end);
    horizonEnd.update(end);
  }

  @Override
  public scala.collection.Iterator<Row> handleExpiredTimer(
      String key, TimerValues timerValues, ExpiredTimerInfo expiredTimerInfo) {
    horizonEnd.clear(); // the key's only timer: its horizon is over
    return CollectionConverters.asScala(Collections.<Row>emptyIterator());
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
