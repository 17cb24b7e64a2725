//! The packets table's columns (`metaroce_analyze::rows`) as Arrow arrays.

use std::sync::Arc;

use arrow_array::builder::{ListBuilder, UInt16Builder, UInt32Builder};
use arrow_array::{
    ArrayRef, BooleanArray, Int64Array, StringArray, UInt8Array, UInt16Array, UInt32Array,
    UInt64Array,
};
use metaroce_analyze::rows::{Column, Values};

/// One column as an Arrow array (nulls where the table has them).
pub fn arrow_array(c: Column) -> ArrayRef {
    match c.values {
        Values::U8(v) => Arc::new(UInt8Array::from(v)),
        Values::U16(v) => Arc::new(UInt16Array::from(v)),
        Values::U32(v) => Arc::new(UInt32Array::from(v)),
        Values::U64(v) => Arc::new(UInt64Array::from(v)),
        Values::Bool(v) => Arc::new(BooleanArray::from(v)),
        Values::OptU8(v) => Arc::new(UInt8Array::from(v)),
        Values::OptU16(v) => Arc::new(UInt16Array::from(v)),
        Values::OptU32(v) => Arc::new(UInt32Array::from(v)),
        Values::OptU64(v) => Arc::new(UInt64Array::from(v)),
        Values::OptI64(v) => Arc::new(Int64Array::from(v)),
        Values::Str(v) => Arc::new(StringArray::from(v)),
        Values::OptStr(v) => Arc::new(StringArray::from(v)),
        Values::Text(v) => Arc::new(StringArray::from(v)),
        Values::OptText(v) => Arc::new(StringArray::from(v)),
        Values::ListU32(v) => {
            let mut b = ListBuilder::new(UInt32Builder::new());
            for list in v {
                b.append_option(list.map(|l| l.into_iter().map(Some)));
            }
            Arc::new(b.finish())
        }
        Values::ListU16(v) => {
            let mut b = ListBuilder::new(UInt16Builder::new());
            for list in v {
                b.append_option(list.map(|l| l.into_iter().map(Some)));
            }
            Arc::new(b.finish())
        }
    }
}
