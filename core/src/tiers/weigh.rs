//! What a value weighs against L2's byte bound when the store was given no weigher, and
//! [`AnyValue`], the value of any type that one L2 keeps for caches of different value types
//! (as one `lua_shared_dict` serves mlcache instances whatever they store): it carries what the
//! value it wraps weighs, so that the default weigher weighs that.

use crate::sync::PayloadArc;
use std::any::Any;
use std::fmt;
use std::mem::size_of;

/// Byte-like values (`String`, `Vec<u8>`, `Box<str>`, `Box<[u8]>`) weigh their length besides
/// their own size, so that a store of strings is bounded by what they hold; any other value
/// weighs `size_of::<T>()` (say what it holds with `L2::weigh_with`).
pub(crate) fn default_weight<T: Any>(value: &T) -> usize {
    let any = value as &dyn Any;
    let heap = if let Some(s) = any.downcast_ref::<String>() {
        s.len()
    } else if let Some(v) = any.downcast_ref::<Vec<u8>>() {
        v.len()
    } else if let Some(s) = any.downcast_ref::<Box<str>>() {
        s.len()
    } else if let Some(b) = any.downcast_ref::<Box<[u8]>>() {
        b.len()
    } else if let Some(v) = any.downcast_ref::<AnyValue>() {
        return v.weight();
    } else {
        0
    };
    size_of::<T>() + heap
}

/// A value of any type, shared (no copy when a cache hands it out as its own type).
#[derive(Clone)]
pub struct AnyValue {
    value: PayloadArc<dyn Any + Send + Sync>,
    /// What the value weighs in L2 by default (see `default_weight`).
    weight: usize,
}

impl AnyValue {
    /// Wraps `value`.
    pub fn new<V: Any + Send + Sync>(value: V) -> Self {
        Self {
            weight: default_weight(&value),
            value: PayloadArc::new(value),
        }
    }

    /// What the wrapped value weighs by default.
    pub(crate) fn weight(&self) -> usize {
        self.weight
    }

    /// The value, if it is a `V`.
    pub fn downcast<V: Any + Send + Sync>(&self) -> Option<PayloadArc<V>> {
        self.value.clone().downcast().ok()
    }
}

impl fmt::Debug for AnyValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("AnyValue(..)")
    }
}

#[cfg(all(test, not(mcb_loom)))]
mod tests {
    use super::*;

    #[test]
    fn byte_like_values_weigh_their_length() {
        let s = String::from("0123456789");
        assert_eq!(default_weight(&s), size_of::<String>() + 10);
        assert_eq!(default_weight(&vec![0u8; 100]), size_of::<Vec<u8>>() + 100);
        assert_eq!(
            default_weight(&Box::<str>::from("abc")),
            size_of::<Box<str>>() + 3
        );
        assert_eq!(default_weight(&7u64), 8);
        assert_eq!(
            default_weight(&AnyValue::new(s)),
            default_weight(&String::new()) + 10
        );
    }
}
