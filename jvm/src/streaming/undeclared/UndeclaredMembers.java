package streaming.undeclared;

import java.time.ZoneOffset;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;

import com.fasterxml.jackson.core.io.JsonStringEncoder;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.api.java.UDF3;
import org.apache.spark.types.variant.Variant;
import org.apache.spark.unsafe.types.VariantVal;

import scala.collection.Seq;

/**
 * The members of the event object (element {@code index} of an array variant) whose keys are
 * not among {@code declared}: a row of their compact JSON object ({@code fields}) and their
 * key names ({@code keys}), both in the object's key order; null when there are none or the
 * element is not an object.
 *
 * <p>Why a function of its own and not Spark's expressions: the same result from a cast to
 * {@code map<string,variant>}, {@code map_filter} and {@code to_json} cost a quarter of the
 * classification's time, mostly because {@code map_filter}, a higher-order function, has no
 * generated code and split the stage's generated code in two (docs/job.md, "Keys no field
 * declares: the cost"). Values are written as {@code to_json} writes a variant ({@link
 * Variant#toJson}) and keys as Jackson writes a field name, so the text is what the
 * expressions wrote.
 */
public final class UndeclaredMembers implements UDF3<VariantVal, Integer, Seq<String>, Row> {

  private static final long serialVersionUID = 1L;

  /** The declared names of the last call and their set: the same for every row of a plan.
   * One reference, so a thread never pairs one call's names with another's set. */
  private transient volatile Declared last;

  private record Declared(Seq<String> names, Set<String> set) {}

  @Override
  public Row call(VariantVal array, Integer index, Seq<String> declared) {
    Variant event = EventObject.at(array, index);
    if (event == null || declared == null) {
      return null;
    }
    Set<String> names = declaredNames(declared);
    JsonStringEncoder encoder = JsonStringEncoder.getInstance();
    StringBuilder json = null;
    List<String> keys = null;
    int size = event.objectSize();
    for (int i = 0; i < size; i++) {
      Variant.ObjectField member = event.getFieldAtIndex(i);
      if (names.contains(member.key)) {
        continue;
      }
      if (json == null) {
        json = new StringBuilder("{");
        keys = new ArrayList<>();
      } else {
        json.append(',');
      }
      // Parsed JSON holds no timestamp: the zone never shows in the text.
      json.append('"').append(encoder.quoteAsString(member.key)).append("\":")
          .append(member.value.toJson(ZoneOffset.UTC));
      keys.add(member.key);
    }
    return json == null ? null : RowFactory.create(json.append('}').toString(), keys);
  }

  private Set<String> declaredNames(Seq<String> declared) {
    Declared known = last;
    if (known == null || !declared.equals(known.names())) {
      Set<String> set = new HashSet<>();
      for (int i = 0; i < declared.length(); i++) {
        set.add(declared.apply(i));
      }
      known = new Declared(declared, set);
      last = known;
    }
    return known.set();
  }
}
