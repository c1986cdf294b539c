//! The store's settings ([`Config`]) and memcached's size limits.

/// The longest key memcached accepts.
pub const KEY_MAX: usize = 250;
/// memcached's slab page: the least a cache holds, and the default `item_size_max`.
pub const PAGE_SIZE: usize = 1 << 20;

/// The store's settings (memcached's default engine's, where they matter).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Config {
    /// Hand out CAS values (else every CAS is 0).
    pub use_cas: bool,
    /// Evict when full (else stores fail with [`Error::NoMemory`](super::Error::NoMemory)).
    pub eviction: bool,
    /// Bytes for items (at least one [`PAGE_SIZE`] page is used whatever this says).
    pub cache_size: usize,
    /// The largest item (key, value and overhead), in bytes.
    pub item_size_max: usize,
    /// L2 shards; 0 picks by CPU count. Tests set 1 to make eviction order exact.
    pub shards: usize,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            use_cas: true,
            eviction: true,
            cache_size: 64 * PAGE_SIZE,
            item_size_max: PAGE_SIZE,
            shards: 0,
        }
    }
}
