//! Per-bucket "top keys": which keys a bucket's clients touch, and how.
//!
//! The seed (`bucket_engine.c`) keeps, when `MEMCACHED_TOP_KEYS=N` is set, `TK_SHARDS` (8)
//! shards per bucket, each with its own lock and an LRU-bounded set of keys; every key carries
//! one counter per operation plus the time it was first and last seen. The `topkeys` stat lists
//! every tracked key with a value `get_hits=N,get_misses=N,...,ctime=N,atime=N`, the counters in
//! the order of memcached's `TK_OPS` and the two times as seconds before "now".
//!
//! Differences from the seed, on purpose:
//! - `N` bounds the keys of the whole bucket (spread over the shards, each shard keeping at
//!   least one key), not each shard: the seed's `topkeys_init(N)` per shard kept up to `8 N`.
//! - `atime` moves on every access. The seed's `TK` macro never touched it, so its `atime`
//!   always equalled its `ctime`, against the field's own comment ("last accessed").
//! - An empty key is ignored (the seed asserted `nkey > 0`).
//!
//! Each shard is a `LinkedSlab` of entries on one LRU list plus a hash index from key to slot:
//! a hit moves an entry to the front without allocating, a new key when full reuses the least
//! recently used entry's slot.

use crate::linked_slab::{LinkedSlab, List};
use crate::sync::Mutex;
use std::collections::HashMap;
use std::fmt::{self, Write as _};

/// How many independently locked shards a bucket's top keys are split into (the seed's
/// `TK_SHARDS`).
const SHARDS: usize = 8;

/// What happened to a key (one counter each, in the seed's stat order).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum TopKeyOp {
    /// A get found the key.
    GetHits,
    /// A get did not find the key.
    GetMisses,
    /// A store other than CAS.
    CmdSet,
    /// An increment found the key.
    IncrHits,
    /// An increment did not find the key.
    IncrMisses,
    /// A decrement found the key.
    DecrHits,
    /// A decrement did not find the key.
    DecrMisses,
    /// A delete found the key.
    DeleteHits,
    /// A delete did not find the key.
    DeleteMisses,
    /// The engine evicted the key.
    Evictions,
    /// A CAS store succeeded.
    CasHits,
    /// A CAS store (or delete) met a different CAS.
    CasBadval,
    /// A CAS store did not find the key.
    CasMisses,
    /// ep-engine's get_replica (0x83).
    GetReplica,
    /// ep-engine's evict_key (0x93).
    Evict,
    /// ep-engine's get_locked (0x94).
    Getl,
    /// ep-engine's unlock_key (0x95).
    Unlock,
    /// ep-engine's get_meta / getq_meta (0xa0, 0xa1).
    GetMeta,
    /// ep-engine's set_with_meta / setq_with_meta (0xa2, 0xa3).
    SetMeta,
    /// ep-engine's del_with_meta / delq_with_meta (0xa8, 0xa9).
    DelMeta,
}

impl TopKeyOp {
    /// Every operation, in stat order.
    const ALL: [TopKeyOp; 20] = [
        TopKeyOp::GetHits,
        TopKeyOp::GetMisses,
        TopKeyOp::CmdSet,
        TopKeyOp::IncrHits,
        TopKeyOp::IncrMisses,
        TopKeyOp::DecrHits,
        TopKeyOp::DecrMisses,
        TopKeyOp::DeleteHits,
        TopKeyOp::DeleteMisses,
        TopKeyOp::Evictions,
        TopKeyOp::CasHits,
        TopKeyOp::CasBadval,
        TopKeyOp::CasMisses,
        TopKeyOp::GetReplica,
        TopKeyOp::Evict,
        TopKeyOp::Getl,
        TopKeyOp::Unlock,
        TopKeyOp::GetMeta,
        TopKeyOp::SetMeta,
        TopKeyOp::DelMeta,
    ];

    /// The counter's name in the stat value (memcached's `TK_OPS` names).
    pub fn name(self) -> &'static str {
        match self {
            TopKeyOp::GetHits => "get_hits",
            TopKeyOp::GetMisses => "get_misses",
            TopKeyOp::CmdSet => "cmd_set",
            TopKeyOp::IncrHits => "incr_hits",
            TopKeyOp::IncrMisses => "incr_misses",
            TopKeyOp::DecrHits => "decr_hits",
            TopKeyOp::DecrMisses => "decr_misses",
            TopKeyOp::DeleteHits => "delete_hits",
            TopKeyOp::DeleteMisses => "delete_misses",
            TopKeyOp::Evictions => "evictions",
            TopKeyOp::CasHits => "cas_hits",
            TopKeyOp::CasBadval => "cas_badval",
            TopKeyOp::CasMisses => "cas_misses",
            TopKeyOp::GetReplica => "get_replica",
            TopKeyOp::Evict => "evict",
            TopKeyOp::Getl => "getl",
            TopKeyOp::Unlock => "unlock",
            TopKeyOp::GetMeta => "get_meta",
            TopKeyOp::SetMeta => "set_meta",
            TopKeyOp::DelMeta => "del_meta",
        }
    }

    /// The counter's slot (its position in stat order).
    fn index(self) -> usize {
        self as usize
    }
}

/// One tracked key.
struct Entry {
    key: Box<[u8]>,
    counts: [u64; TopKeyOp::ALL.len()],
    /// When the key was first seen (host rel_time seconds).
    ctime: u32,
    /// When the key was last seen.
    atime: u32,
}

impl Entry {
    /// The seed's stat value: every counter, then ctime and atime as ages relative to `now`.
    fn format(&self, now: u32, out: &mut String) {
        out.clear();
        for op in TopKeyOp::ALL {
            // Writing to a String cannot fail.
            let _ = write!(out, "{}={},", op.name(), self.counts[op.index()]);
        }
        let _ = write!(
            out,
            "ctime={},atime={}",
            now.wrapping_sub(self.ctime),
            now.wrapping_sub(self.atime)
        );
    }
}

/// One shard: at most `capacity` keys, in least-recently-used order.
struct Shard {
    capacity: usize,
    entries: LinkedSlab<Entry>,
    /// Front: most recently used. Back: least recently used, the next to go.
    recency: List,
    index: HashMap<Box<[u8]>, u32>,
}

impl Shard {
    fn new(capacity: usize) -> Self {
        Shard {
            capacity,
            entries: LinkedSlab::new(),
            recency: List::EMPTY,
            index: HashMap::new(),
        }
    }

    /// The entry for `key`, now the most recently used, created (evicting the least recently
    /// used key when full) if new.
    fn touch(&mut self, key: &[u8], now: u32) -> &mut Entry {
        let slot = match self.index.get(key) {
            Some(&slot) => {
                self.entries.move_front(&mut self.recency, None, slot);
                slot
            }
            None => {
                if self.recency.len() >= self.capacity {
                    let victim = self.recency.back().expect("a full shard holds a key");
                    let gone = self.entries.remove(&mut self.recency, victim);
                    self.index.remove(&gone.key);
                }
                let fresh = Entry {
                    key: key.into(),
                    counts: [0; TopKeyOp::ALL.len()],
                    ctime: now,
                    atime: now,
                };
                let slot = self.entries.push_front(&mut self.recency, fresh);
                self.index.insert(key.into(), slot);
                slot
            }
        };
        self.entries.get_mut(slot)
    }

    /// Entries from the most to the least recently used (the seed's list order).
    fn iter(&self) -> impl Iterator<Item = &Entry> {
        self.entries.iter(&self.recency)
    }

    /// See [`TopKeys::validate`].
    fn validate(&self) {
        self.entries.validate(&[&self.recency]);
        assert!(self.recency.len() <= self.capacity, "shard over capacity");
        assert_eq!(self.index.len(), self.recency.len(), "index size");
        for (key, &slot) in &self.index {
            assert_eq!(self.entries.get(slot).key, *key, "index points elsewhere");
        }
    }
}

/// A bucket's top keys: per-key operation counters, bounded by LRU eviction.
pub struct TopKeys {
    shards: Box<[Mutex<Shard>]>,
}

impl TopKeys {
    /// `max_keys` keys kept in total (spread over the shards), as MEMCACHED_TOP_KEYS=N.
    ///
    /// Up to 8 shards, each keeping at least one key; the capacities add up to exactly
    /// `max_keys`. With `max_keys == 0` nothing is tracked.
    pub fn new(max_keys: usize) -> Self {
        let n = max_keys.min(SHARDS);
        let shards = (0..n)
            .map(|i| Mutex::new(Shard::new(max_keys / n + usize::from(i < max_keys % n))))
            .collect();
        TopKeys { shards }
    }

    /// The shard `key` lives in (FNV-1a: stable, cheap, spreads short keys well).
    fn shard(&self, key: &[u8]) -> &Mutex<Shard> {
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for &b in key {
            h = (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3);
        }
        // Truncation is fine: only the low bits pick a shard.
        &self.shards[(h as usize) % self.shards.len()]
    }

    /// Counts `op` on `key` at time `now` (host rel_time seconds). Takes only the key's shard lock.
    pub fn record(&self, key: &[u8], op: TopKeyOp, now: u32) {
        if key.is_empty() || self.shards.is_empty() {
            return;
        }
        let mut shard = self.shard(key).lock();
        let entry = shard.touch(key, now);
        entry.atime = now;
        let count = &mut entry.counts[op.index()];
        *count = count.wrapping_add(1);
    }

    /// Every tracked key with its stat value in the seed's format, e.g.
    /// "get_hits=1,get_misses=0,cmd_set=2,...,ctime=N,atime=N" (exact field names/order from
    /// memcached's topkeys; ctime/atime are the seconds since the key was first/last seen, as
    /// memcached computes them relative to `now`). Shard by shard, each from its most to its
    /// least recently used key; `add` runs under that shard's lock and must not call back into
    /// this structure.
    pub fn stats(&self, now: u32, add: &mut dyn FnMut(&[u8], &str)) {
        let mut value = String::with_capacity(400);
        for shard in self.shards.iter() {
            let shard = shard.lock();
            for entry in shard.iter() {
                entry.format(now, &mut value);
                add(&entry.key, &value);
            }
        }
    }

    /// How many keys are tracked now.
    pub fn len(&self) -> usize {
        self.shards.iter().map(|s| s.lock().recency.len()).sum()
    }

    /// Whether no key is tracked.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// For property tests: checks every shard's LRU (its linked list, its capacity and its
    /// key index).
    ///
    /// # Panics
    /// On the first broken invariant.
    #[doc(hidden)]
    pub fn validate(&self) {
        for shard in self.shards.iter() {
            shard.lock().validate();
        }
    }
}

impl fmt::Debug for TopKeys {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let capacity: usize = self.shards.iter().map(|s| s.lock().capacity).sum();
        f.debug_struct("TopKeys")
            .field("shards", &self.shards.len())
            .field("capacity", &capacity)
            .field("len", &self.len())
            .finish()
    }
}

#[cfg(all(test, not(mcb_loom)))]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn collect(tk: &TopKeys, now: u32) -> BTreeMap<Vec<u8>, String> {
        let mut out = BTreeMap::new();
        tk.stats(now, &mut |k, v| {
            assert!(
                out.insert(k.to_vec(), v.to_string()).is_none(),
                "key listed twice"
            );
        });
        out
    }

    fn field(value: &str, name: &str) -> u64 {
        value
            .split(',')
            .find_map(|kv| kv.strip_prefix(name)?.strip_prefix('='))
            .unwrap_or_else(|| panic!("{name} missing in {value}"))
            .parse()
            .expect("a number")
    }

    #[test]
    fn format_lists_every_counter_in_seed_order_then_times() {
        let tk = TopKeys::new(10);
        tk.record(b"k", TopKeyOp::GetHits, 100);
        tk.record(b"k", TopKeyOp::CmdSet, 103);
        tk.record(b"k", TopKeyOp::CmdSet, 105);
        let stats = collect(&tk, 110);
        assert_eq!(
            stats[&b"k"[..]],
            "get_hits=1,get_misses=0,cmd_set=2,incr_hits=0,incr_misses=0,decr_hits=0,\
             decr_misses=0,delete_hits=0,delete_misses=0,evictions=0,cas_hits=0,cas_badval=0,\
             cas_misses=0,get_replica=0,evict=0,getl=0,unlock=0,get_meta=0,set_meta=0,\
             del_meta=0,ctime=10,atime=5"
        );
    }

    #[test]
    fn every_op_counts_its_own_field() {
        let tk = TopKeys::new(4);
        for (i, op) in TopKeyOp::ALL.into_iter().enumerate() {
            for _ in 0..=i {
                tk.record(b"key", op, 7);
            }
        }
        let stats = collect(&tk, 7);
        let value = &stats[&b"key"[..]];
        for (i, op) in TopKeyOp::ALL.into_iter().enumerate() {
            assert_eq!(field(value, op.name()), i as u64 + 1, "{}", op.name());
        }
        assert_eq!(field(value, "ctime"), 0);
        assert_eq!(field(value, "atime"), 0);
    }

    #[test]
    fn keys_are_counted_apart() {
        let tk = TopKeys::new(100);
        for i in 0..50u32 {
            let key = format!("key-{i}");
            for _ in 0..=i {
                tk.record(key.as_bytes(), TopKeyOp::GetMisses, 1);
            }
        }
        let stats = collect(&tk, 1);
        assert_eq!(stats.len(), 50);
        for i in 0..50u32 {
            let value = &stats[format!("key-{i}").as_bytes()];
            assert_eq!(field(value, "get_misses"), u64::from(i) + 1);
            assert_eq!(field(value, "get_hits"), 0);
        }
    }

    #[test]
    fn full_shard_evicts_its_least_recently_used_key() {
        // One key per shard at most: a new key in a shard replaces the old one.
        let tk = TopKeys::new(1);
        tk.record(b"a", TopKeyOp::GetHits, 1);
        tk.record(b"b", TopKeyOp::GetHits, 2);
        let stats = collect(&tk, 2);
        assert_eq!(stats.keys().collect::<Vec<_>>(), [&b"b".to_vec()]);

        // Three keys: touching "a" makes "b" the least recently used one.
        let tk = TopKeys::new(3);
        // Find keys that share a shard so the LRU order is observable.
        let target = tk.shard(b"a") as *const _;
        let same: Vec<String> = (0..)
            .map(|i| format!("k{i}"))
            .filter(|k| std::ptr::eq(tk.shard(k.as_bytes()), target))
            .take(3)
            .collect();
        let cap = tk.shard(b"a").lock().capacity;
        assert_eq!(cap, 1, "3 keys over 3 shards: one each");
        tk.record(same[0].as_bytes(), TopKeyOp::CmdSet, 1);
        tk.record(same[1].as_bytes(), TopKeyOp::CmdSet, 2);
        let stats = collect(&tk, 3);
        assert!(!stats.contains_key(same[0].as_bytes()));
        assert!(stats.contains_key(same[1].as_bytes()));
    }

    #[test]
    fn lru_order_decides_the_victim_within_a_shard() {
        // 16 keys over 8 shards: two per shard.
        let tk = TopKeys::new(16);
        let target = tk.shard(b"x") as *const _;
        let same: Vec<String> = (0..)
            .map(|i| format!("k{i}"))
            .filter(|k| std::ptr::eq(tk.shard(k.as_bytes()), target))
            .take(3)
            .collect();
        let (a, b, c) = (same[0].as_bytes(), same[1].as_bytes(), same[2].as_bytes());
        tk.record(a, TopKeyOp::GetHits, 1);
        tk.record(b, TopKeyOp::GetHits, 2);
        tk.record(a, TopKeyOp::GetHits, 3); // b is now the least recently used
        tk.record(c, TopKeyOp::GetHits, 4); // evicts b
        let stats = collect(&tk, 4);
        assert!(stats.contains_key(a));
        assert!(!stats.contains_key(b));
        assert!(stats.contains_key(c));
        assert_eq!(field(&stats[a], "get_hits"), 2);
        assert_eq!(field(&stats[a], "ctime"), 3);
        assert_eq!(field(&stats[a], "atime"), 1);

        // An evicted key starts again from zero.
        tk.record(b, TopKeyOp::GetMisses, 5); // evicts a (c was used later)
        let stats = collect(&tk, 5);
        assert!(!stats.contains_key(a));
        assert_eq!(field(&stats[b], "get_hits"), 0);
        assert_eq!(field(&stats[b], "get_misses"), 1);
        assert_eq!(field(&stats[b], "ctime"), 0);
    }

    #[test]
    fn total_never_exceeds_max_keys() {
        for max in [1, 2, 7, 8, 9, 20, 100] {
            let tk = TopKeys::new(max);
            for i in 0..1000 {
                tk.record(format!("key{i}").as_bytes(), TopKeyOp::CmdSet, i);
                // An older key again: a hit moves it to the front, or it comes back.
                tk.record(format!("key{}", i / 2).as_bytes(), TopKeyOp::GetHits, i);
                tk.validate();
                assert!(tk.len() <= max);
            }
            // Every shard is full after many distinct keys.
            assert_eq!(tk.len(), max, "max_keys {max}");
            assert_eq!(collect(&tk, 1000).len(), max);
        }
    }

    #[test]
    fn stats_list_most_recent_first_within_a_shard() {
        let tk = TopKeys::new(SHARDS * 3);
        let target = tk.shard(b"x") as *const _;
        let same: Vec<String> = (0..)
            .map(|i| format!("k{i}"))
            .filter(|k| std::ptr::eq(tk.shard(k.as_bytes()), target))
            .take(3)
            .collect();
        for (t, k) in same.iter().enumerate() {
            tk.record(k.as_bytes(), TopKeyOp::GetHits, t as u32);
        }
        let mut order = Vec::new();
        tk.stats(3, &mut |k, _| order.push(k.to_vec()));
        let want: Vec<Vec<u8>> = same.iter().rev().map(|k| k.as_bytes().to_vec()).collect();
        assert_eq!(order, want);
    }

    #[test]
    fn zero_keys_tracks_nothing_and_empty_keys_are_ignored() {
        let tk = TopKeys::new(0);
        tk.record(b"k", TopKeyOp::GetHits, 1);
        assert!(tk.is_empty());
        assert!(collect(&tk, 1).is_empty());

        let tk = TopKeys::new(5);
        tk.record(b"", TopKeyOp::GetHits, 1);
        assert!(tk.is_empty());
    }

    #[test]
    fn binary_keys_and_clock_wrap() {
        let tk = TopKeys::new(2);
        let key = [0u8, 0xff, b'\n', 0x80];
        tk.record(&key, TopKeyOp::DelMeta, u32::MAX);
        let stats = collect(&tk, 1);
        assert_eq!(field(&stats[&key[..]], "del_meta"), 1);
        assert_eq!(field(&stats[&key[..]], "ctime"), 2);
    }

    #[test]
    fn concurrent_records_all_count() {
        let tk = crate::sync::Arc::new(TopKeys::new(64));
        let threads: Vec<_> = (0..4)
            .map(|t| {
                let tk = tk.clone();
                crate::sync::thread::spawn(move || {
                    for i in 0..1000u32 {
                        let key = format!("k{}", i % 16);
                        tk.record(key.as_bytes(), TopKeyOp::IncrHits, t);
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().expect("thread");
        }
        let stats = collect(&tk, 4);
        assert_eq!(stats.len(), 16);
        let total: u64 = stats.values().map(|v| field(v, "incr_hits")).sum();
        assert_eq!(total, 4000);
    }

    #[test]
    fn is_send_sync_debug() {
        fn check<T: Send + Sync + fmt::Debug>() {}
        check::<TopKeys>();
        let tk = TopKeys::new(9);
        tk.record(b"k", TopKeyOp::GetHits, 0);
        let s = format!("{tk:?}");
        assert!(s.contains("capacity: 9") && s.contains("len: 1"), "{s}");
    }
}
