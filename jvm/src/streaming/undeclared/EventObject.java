package streaming.undeclared;

import org.apache.spark.types.variant.Variant;
import org.apache.spark.types.variant.VariantUtil;
import org.apache.spark.unsafe.types.VariantVal;

/** Where the job's classification keeps a record's event: an element of an array variant. */
final class EventObject {

  private EventObject() {}

  /** The object at element {@code index} of {@code array}, or null when any of that is not so. */
  static Variant at(VariantVal array, Integer index) {
    if (array == null || index == null || index < 0) {
      return null;
    }
    Variant doc = new Variant(array.getValue(), array.getMetadata());
    if (doc.getType() != VariantUtil.Type.ARRAY || doc.arraySize() <= index) {
      return null;
    }
    Variant event = doc.getElementAtIndex(index);
    return event.getType() == VariantUtil.Type.OBJECT ? event : null;
  }
}
