package streaming.dedup;

import java.io.ByteArrayOutputStream;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.sql.Timestamp;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

import org.apache.spark.sql.Encoders;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.streaming.ExpiredTimerInfo;
import org.apache.spark.sql.streaming.MapState;
import org.apache.spark.sql.streaming.OutputMode;
import org.apache.spark.sql.streaming.StatefulProcessorWithInitialState;
import org.apache.spark.sql.streaming.TTLConfig;
import org.apache.spark.sql.streaming.TimeMode;
import org.apache.spark.sql.streaming.TimerValues;

import scala.Tuple2;
import scala.jdk.javaapi.CollectionConverters;

/**
 * Remembers each id for {@code horizonMs} of Kinesis arrival time, in buckets of
 * ids, and forgets them through event-time timers, one per bucket and batch.
 *
 * <p>Why timers and not {@code dropDuplicatesWithinWatermark}: Spark's built-in
 * operator finds expired ids by scanning every id it holds, at the end of every
 * batch. Timers sit in an index ordered by time; Spark walks it only up to the
 * first timer the watermark has not passed, so a batch costs what it brings and
 * what expires, never what is held.
 *
 * <p>Why buckets and not one timer per id: Spark 4.1.1's {@code registerTimer}
 * reads whether the timer exists and writes two entries, each re-encoding the
 * grouping key, and that was the whole gap to the built-in operator on a
 * 200,000-id batch (docs/job.md, "De-duplication"). Here the grouping key is a
 * bucket of ids ({@link ArrivalDedup} hashes the id), and per new id the state
 * does one point read and one write; each bucket registers one timer per batch
 * and expiry slot, whatever the ids it brings.
 *
 * <p>Why arrival time and not a processing-time TTL: the watermark moves with the
 * records, not with the clock. A job that stopped for hours and catches up sees
 * the original and its re-send as minutes apart, as they were.
 *
 * <p>State per bucket:
 * <ul>
 *   <li>{@value #HORIZON_ENDS}: id to the arrival millis its horizon ends at. A row
 *       is a re-send, and dropped, when it arrived at or before the held end
 *       (compared on the row's own arrival time, so whether the id's timer already
 *       fired does not matter); of several rows of one id in a batch the earliest
 *       arrival passes. Reading it is a point read, which RocksDB's bloom filters
 *       answer for a new id without reading a data block, whatever the ids held.
 *   <li>{@value #EXPIRING_IDS}: timer millis to the ids that timer forgets. A batch's
 *       new ids in one slot of {@code horizonMs / }{@value #SLOTS_PER_HORIZON} go
 *       under one timer at their latest end, so an id is held at most one slot past
 *       its horizon. The timer's callback removes each of its ids whose held end has
 *       passed, and keeps one that came back after its horizon (a later end, under a
 *       later timer).
 * </ul>
 *
 * <p>The initial state (a seed, the migration in docs/operate.md) is an id already
 * stored with its arrival millis.
 */
public final class ArrivalDedupProcessor
    extends StatefulProcessorWithInitialState<Integer, Row, Row, Tuple2<String, Long>> {

  /** The map of ids to horizon ends; model/checkpoint_state.py refuses a checkpoint
   * of this processor's state without it (earlier versions kept one value and one
   * timer per id, or timers only). */
  public static final String HORIZON_ENDS = "horizonEnds";
  /** The map of timers to the ids they forget. */
  public static final String EXPIRING_IDS = "expiringIds";
  /** Slots per horizon: how late an id may be forgotten, against how many timers
   * a bucket holds (at most this many, plus one per batch that meets a slot's end). */
  public static final int SLOTS_PER_HORIZON = 256;

  private static final long serialVersionUID = 2L;

  private final int keyIndex;
  private final int arrivalIndex;
  private final long horizonMs;
  private final long slotMs;
  private transient MapState<String, Long> horizonEnds;
  private transient MapState<Long, byte[]> expiringIds;

  public ArrivalDedupProcessor(int keyIndex, int arrivalIndex, long horizonMs) {
    if (horizonMs <= 0) {
      throw new IllegalArgumentException("horizonMs must be > 0, got " + horizonMs);
    }
    this.keyIndex = keyIndex;
    this.arrivalIndex = arrivalIndex;
    this.horizonMs = horizonMs;
    this.slotMs = Math.max(1, horizonMs / SLOTS_PER_HORIZON);
  }

  @Override
  public void init(OutputMode outputMode, TimeMode timeMode) {
    horizonEnds = getHandle().getMapState(
        HORIZON_ENDS, Encoders.STRING(), Encoders.LONG(), TTLConfig.NONE());
    expiringIds = getHandle().getMapState(
        EXPIRING_IDS, Encoders.LONG(), Encoders.BINARY(), TTLConfig.NONE());
  }

  @Override
  public scala.collection.Iterator<Row> handleInputRows(
      Integer bucket, scala.collection.Iterator<Row> rows, TimerValues timerValues) {
    // A Row per id, or a List<Row> for the rare id with several rows in the batch.
    Map<String, Object> byId = new HashMap<>();
    while (rows.hasNext()) {
      Row row = rows.next();
      String id = row.getString(keyIndex);
      Object seen = byId.putIfAbsent(id, row);
      if (seen instanceof Row first) {
        List<Row> several = new ArrayList<>(2);
        several.add(first);
        several.add(row);
        byId.put(id, several);
      } else if (seen != null) {
        @SuppressWarnings("unchecked")
        List<Row> several = (List<Row>) seen;
        several.add(row);
      }
    }
    List<Row> out = new ArrayList<>(byId.size());
    Expiring expiring = new Expiring();
    for (Map.Entry<String, Object> entry : byId.entrySet()) {
      String id = entry.getKey();
      Long held = horizonEnds.getValue(id);
      long end = held == null ? Long.MIN_VALUE : held;
      if (entry.getValue() instanceof Row only) { // the usual case
        long arrival = millis(only.get(arrivalIndex));
        if (arrival > end) {
          out.add(only);
          end = arrival + horizonMs;
        }
      } else {
        @SuppressWarnings("unchecked")
        List<Row> several = (List<Row>) entry.getValue();
        several.sort(Comparator.comparingLong(row -> millis(row.get(arrivalIndex))));
        for (Row row : several) {
          long arrival = millis(row.get(arrivalIndex));
          if (arrival > end) { // the last horizon covers the earlier ones
            out.add(row);
            end = arrival + horizonMs;
          }
        }
      }
      if (held == null || end != held) {
        horizonEnds.updateValue(id, end);
        expiring.add(Math.floorDiv(end, slotMs), id, end);
      }
    }
    expiring.forEach(this::expireLater);
    return CollectionConverters.asScala(out.iterator());
  }

  @Override
  public void handleInitialState(
      Integer bucket, Tuple2<String, Long> seed, TimerValues timerValues) {
    Long held = horizonEnds.getValue(seed._1());
    long end = seed._2() + horizonMs;
    if (held == null || end > held) {
      horizonEnds.updateValue(seed._1(), end);
      expireLater(end, List.of(seed._1()));
    }
  }

  /** Puts {@code ids} under the timer at {@code at}, registering it if new (a
   * timer and its entry come and go together). */
  private void expireLater(long at, List<String> ids) {
    byte[] already = expiringIds.getValue(at);
    if (already == null) {
      getHandle().registerTimer(at);
    }
    expiringIds.updateValue(at, IdPack.append(already, ids));
  }

  @Override
  public scala.collection.Iterator<Row> handleExpiredTimer(
      Integer bucket, TimerValues timerValues, ExpiredTimerInfo expiredTimerInfo) {
    long at = expiredTimerInfo.getExpiryTimeInMs();
    byte[] packed = expiringIds.getValue(at);
    if (packed != null) {
      for (String id : IdPack.unpack(packed)) {
        Long held = horizonEnds.getValue(id);
        if (held != null && held <= at) { // else it came back: a later timer has it
          horizonEnds.removeKey(id);
        }
      }
      expiringIds.removeKey(at);
    }
    return CollectionConverters.asScala(java.util.Collections.<Row>emptyIterator());
  }

  /** A batch's new ids of one bucket by expiry slot, each slot's timer at its latest end. */
  private static final class Expiring {
    private static final class Slot {
      private long latest = Long.MIN_VALUE;
      private final List<String> ids = new ArrayList<>();
    }

    private final Map<Long, Slot> slots = new HashMap<>();

    void add(long slot, String id, long end) {
      Slot entry = slots.computeIfAbsent(slot, s -> new Slot());
      entry.ids.add(id);
      entry.latest = Math.max(entry.latest, end);
    }

    void forEach(java.util.function.BiConsumer<Long, List<String>> timerAndIds) {
      slots.values().forEach(entry -> timerAndIds.accept(entry.latest, entry.ids));
    }
  }

  /** Ids as one value: each a 4-byte length and its UTF-8 bytes. */
  static final class IdPack {
    private IdPack() {}

    static byte[] append(byte[] packed, List<String> ids) {
      ByteArrayOutputStream out = new ByteArrayOutputStream();
      if (packed != null) {
        out.writeBytes(packed);
      }
      ByteBuffer length = ByteBuffer.allocate(Integer.BYTES);
      for (String id : ids) {
        byte[] utf8 = id.getBytes(StandardCharsets.UTF_8);
        out.writeBytes(length.clear().putInt(utf8.length).array());
        out.writeBytes(utf8);
      }
      return out.toByteArray();
    }

    static List<String> unpack(byte[] packed) {
      ByteBuffer buffer = ByteBuffer.wrap(packed);
      List<String> ids = new ArrayList<>();
      while (buffer.hasRemaining()) {
        int length = buffer.getInt();
        ids.add(new String(packed, buffer.position(), length, StandardCharsets.UTF_8));
        buffer.position(buffer.position() + length);
      }
      return ids;
    }
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
