//! The store's settings ([`Config`]) and memcached's size limits.

/// The longest key memcached accepts.
pub const KEY_MAX: usize = 250;
/// memcached's slab page, the default `item_size_max`, and the store's segment: the least a
/// cache holds.
pub const PAGE_SIZE: usize = 1 << 20;

/// The store's settings (memcached's default engine's, where they matter, and two of the
/// segment store's own).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Config {
    /// Hand out CAS values (else every CAS is 0, and items keep no CAS word).
    pub use_cas: bool,
    /// Evict when full (else stores fail with [`Error::NoMemory`](super::Error::NoMemory)).
    pub eviction: bool,
    /// Bytes for everything the store keeps: segments, large objects and index (at least one
    /// segment and a small index, or one largest item, whatever this says).
    pub cache_size: usize,
    /// The largest item (key, value and overhead), in bytes.
    pub item_size_max: usize,
    /// Write lanes (each appends to a segment of its own); 0 picks by CPU count and cache
    /// size. Tests set 1 to make eviction order exact.
    pub lanes: usize,
    /// Bytes per segment; 0 picks [`PAGE_SIZE`]. Smaller segments are for tests and models.
    pub segment_size: usize,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            use_cas: true,
            eviction: true,
            cache_size: 64 * PAGE_SIZE,
            item_size_max: PAGE_SIZE,
            lanes: 0,
            segment_size: 0,
        }
    }
}
