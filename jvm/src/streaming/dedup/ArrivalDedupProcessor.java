package streaming.dedup;

import java.sql.Timestamp;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Collections;
import java.util.Comparator;
import java.util.List;

import org.apache.spark.sql.Row;
import org.apache.spark.sql.streaming.ExpiredTimerInfo;
import org.apache.spark.sql.streaming.OutputMode;
import org.apache.spark.sql.streaming.StatefulProcessorWithInitialState;
import org.apache.spark.sql.streaming.TimeMode;
import org.apache.spark.sql.streaming.TimerValues;

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
 * <p>State per id: the timer alone, at the arrival millis its horizon ends at.
 * No value state beside it: Spark already stores each timer twice (by key, to
 * list a key's timers, and by time, to fire them), and a value holding the same
 * number would be a third write per new id, a read per row and a read and a
 * delete per forgotten id. A row is a re-send, and dropped, when it arrived
 * within the horizon of the last occurrence that passed, i.e. at or before the
 * key's latest timer (compared on the rows' own arrival times, so whether a
 * timer already fired does not matter); of several rows of one id in a batch
 * the earliest arrival passes. A fired timer is removed by Spark; the callback
 * has nothing left to do.
 *
 * <p>The initial state (a seed, the migration from the built-in operator in
 * docs/operate.md) is the arrival millis of an id already stored.
 */
public final class ArrivalDedupProcessor
    extends StatefulProcessorWithInitialState<String, Row, Row, Long> {

  private static final long serialVersionUID = 1L;

  private final int arrivalIndex;
  private final long horizonMs;

  public ArrivalDedupProcessor(int arrivalIndex, long horizonMs) {
    if (horizonMs <= 0) {
      throw new IllegalArgumentException("horizonMs must be > 0, got " + horizonMs);
    }
    this.arrivalIndex = arrivalIndex;
    this.horizonMs = horizonMs;
  }

  @Override
  public void init(OutputMode outputMode, TimeMode timeMode) {}

  @Override
  public scala.collection.Iterator<Row> handleInputRows(
      String key, scala.collection.Iterator<Row> rows, TimerValues timerValues) {
    Row only = rows.next();
    long expiresAt = latestTimer();
    if (!rows.hasNext()) { // the usual case: one row for the id in this batch
      long arrival = millis(only.get(arrivalIndex));
      if (arrival <= expiresAt) {
        return CollectionConverters.asScala(Collections.<Row>emptyIterator());
      }
      getHandle().registerTimer(arrival + horizonMs);
      return CollectionConverters.asScala(Collections.singletonList(only).iterator());
    }
    List<Row> all = new ArrayList<>();
    all.add(only);
    rows.foreach(all::add);
    all.sort(Comparator.comparingLong(row -> millis(row.get(arrivalIndex))));
    List<Row> out = new ArrayList<>(1);
    for (Row row : all) {
      long arrival = millis(row.get(arrivalIndex));
      if (arrival > expiresAt) {
        out.add(row);
        expiresAt = arrival + horizonMs;
      }
    }
    if (!out.isEmpty()) { // the last horizon covers the earlier ones
      getHandle().registerTimer(expiresAt);
    }
    return CollectionConverters.asScala(out.iterator());
  }

  @Override
  public void handleInitialState(String key, Long arrivalMs, TimerValues timerValues) {
    long expiresAt = arrivalMs + horizonMs;
    if (expiresAt > latestTimer()) {
      getHandle().registerTimer(expiresAt);
    }
  }

  @Override
  public scala.collection.Iterator<Row> handleExpiredTimer(
      String key, TimerValues timerValues, ExpiredTimerInfo expiredTimerInfo) {
    return CollectionConverters.asScala(Collections.<Row>emptyIterator());
  }

  /**
   * The end of the key's horizon: its latest timer, or {@code Long.MIN_VALUE} for
   * a key not held. A key holds one timer, or two for a moment when it came back
   * after its horizon before the watermark fired the first.
   */
  private long latestTimer() {
    scala.collection.Iterator<Object> timers = getHandle().listTimers();
    long latest = Long.MIN_VALUE;
    while (timers.hasNext()) {
      latest = Math.max(latest, (Long) timers.next());
    }
    return latest;
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
