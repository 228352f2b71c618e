package streaming.undeclared;

import org.apache.spark.sql.api.java.UDF2;
import org.apache.spark.types.variant.Variant;
import org.apache.spark.unsafe.types.VariantVal;

/**
 * The number of members of the event object (element {@code index} of an array variant), or
 * null when that element is not an object: read from the object's header, without decoding a
 * key or a value, so every row can afford it. The job compares it with the number of declared
 * fields the row holds; only a row with more members pays {@link UndeclaredMembers}.
 */
public final class ObjectSize implements UDF2<VariantVal, Integer, Integer> {

  private static final long serialVersionUID = 1L;

  @Override
  public Integer call(VariantVal array, Integer index) {
    Variant event = EventObject.at(array, index);
    return event == null ? null : event.objectSize();
  }
}
