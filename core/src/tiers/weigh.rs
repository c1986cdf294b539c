//! What a value weighs against L2's byte bound when the store was given no weigher.

use super::any::AnyValue;
use std::any::Any;
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
