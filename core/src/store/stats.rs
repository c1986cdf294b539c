//! Operation counters, per thread so that counting a get writes no line another core writes
//! and takes no locked instruction (a stats call sums the threads' slots: `sync::Counts`), and
//! the snapshot a stats call returns.

use crate::sync::Counts;

/// What the store counts, one counter each.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(usize)]
pub(crate) enum Counter {
    TotalItems,
    Reclaimed,
    GetHits,
    GetMisses,
    CmdSet,
    DeleteHits,
    DeleteMisses,
    IncrHits,
    IncrMisses,
    DecrHits,
    DecrMisses,
    CasHits,
    CasMisses,
    CasBadval,
    TouchHits,
    TouchMisses,
    CmdFlush,
}

const COUNTERS: usize = Counter::CmdFlush as usize + 1;

/// Every counter.
#[derive(Debug, Default)]
pub(crate) struct Counters(Counts<COUNTERS>);

impl Counters {
    #[inline]
    pub(crate) fn add(&self, counter: Counter, n: u64) {
        self.0.add(counter as usize, n);
    }

    pub(crate) fn get(&self, counter: Counter) -> u64 {
        self.0.get(counter as usize)
    }

    /// Zeroes every counter (counts racing with the reset may land on either side of it).
    pub(crate) fn reset(&self) {
        self.0.reset();
    }
}

/// A snapshot of the store's statistics, under memcached's names.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[allow(missing_docs)] // the fields are memcached's stats, named as memcached names them
pub struct Stats {
    /// Items stored now (expired ones included until they are reclaimed or evicted).
    pub curr_items: u64,
    /// Successful stores since start (or the last reset).
    pub total_items: u64,
    /// Bytes the items stored now take (key, value and per-item overhead).
    pub bytes: u64,
    /// The configured `cache_size`.
    pub engine_maxbytes: u64,
    /// Items evicted to make room.
    pub evictions: u64,
    /// Expired or flushed items whose memory was taken back on access or by a write.
    pub reclaimed: u64,
    pub cmd_get: u64,
    pub get_hits: u64,
    pub get_misses: u64,
    pub cmd_set: u64,
    pub delete_hits: u64,
    pub delete_misses: u64,
    pub incr_hits: u64,
    pub incr_misses: u64,
    pub decr_hits: u64,
    pub decr_misses: u64,
    pub cas_hits: u64,
    pub cas_misses: u64,
    pub cas_badval: u64,
    pub touch_hits: u64,
    pub touch_misses: u64,
    pub cmd_flush: u64,
}

impl Stats {
    /// `(name, value)` for each statistic, in a stable order.
    pub fn pairs(&self) -> [(&'static str, u64); 22] {
        [
            ("curr_items", self.curr_items),
            ("total_items", self.total_items),
            ("bytes", self.bytes),
            ("engine_maxbytes", self.engine_maxbytes),
            ("evictions", self.evictions),
            ("reclaimed", self.reclaimed),
            ("cmd_get", self.cmd_get),
            ("get_hits", self.get_hits),
            ("get_misses", self.get_misses),
            ("cmd_set", self.cmd_set),
            ("delete_hits", self.delete_hits),
            ("delete_misses", self.delete_misses),
            ("incr_hits", self.incr_hits),
            ("incr_misses", self.incr_misses),
            ("decr_hits", self.decr_hits),
            ("decr_misses", self.decr_misses),
            ("cas_hits", self.cas_hits),
            ("cas_misses", self.cas_misses),
            ("cas_badval", self.cas_badval),
            ("touch_hits", self.touch_hits),
            ("touch_misses", self.touch_misses),
            ("cmd_flush", self.cmd_flush),
        ]
    }
}
