//! The bytes of an item the host may fill in place: memcached's `allocate` hands the host an
//! item whose value it then writes through the pointer `get_item_info` gives, before it stores
//! the item. A `Box<[u8]>` would claim unique access to its bytes for as long as it lives, so
//! the buffer is a `Box<[u8]>` taken apart into a raw pointer, written only under that contract
//! and freed once, on drop.

use mcb_core::store::Bytes;
use std::ptr::NonNull;

/// Key then value, in one allocation, writable by the host between `allocate` and `store`.
pub(crate) struct HostBytes(NonNull<[u8]>);

// SAFETY: the buffer is owned (freed once, on drop) and only written through `ptr_at` by the
// one holder of a freshly allocated item, before the item is stored and while nothing reads
// its value (memcached's contract between `allocate` and `store`); otherwise it is read-only.
unsafe impl Send for HostBytes {}
// SAFETY: as for `Send`.
unsafe impl Sync for HostBytes {}

impl HostBytes {
    fn from_box(bytes: Box<[u8]>) -> Self {
        Self(NonNull::from(Box::leak(bytes)))
    }

    /// The byte at `offset` (at most the length), as a pointer the host may write the value
    /// through under the contract above. Creating it is safe; writing is the caller's promise.
    pub(crate) fn ptr_at(&self, offset: usize) -> *mut u8 {
        // In bounds (or one past the end): the caller passes the key's length.
        self.0.as_ptr().cast::<u8>().wrapping_add(offset)
    }
}

impl Bytes for HostBytes {
    fn zeroed(prefix: &[u8], zeros: usize) -> Self {
        Self::from_box(Box::<[u8]>::zeroed(prefix, zeros))
    }

    fn joined(parts: &[&[u8]]) -> Self {
        Self::from_box(Box::<[u8]>::joined(parts))
    }

    fn bytes(&self) -> &[u8] {
        // SAFETY: the buffer lives as long as `self`; the value part is written only before
        // the item is shared with readers (see `ptr_at`), so no write overlaps this borrow.
        unsafe { self.0.as_ref() }
    }
}

impl Drop for HostBytes {
    fn drop(&mut self) {
        // SAFETY: from Box::leak in `from_box`, freed only here, once.
        drop(unsafe { Box::from_raw(self.0.as_ptr()) });
    }
}
