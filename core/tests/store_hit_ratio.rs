//! The store's eviction against an exact LRU of the same bytes, on a cache-aside loop (a get,
//! and on a miss a set) over Zipf 0.99 keys whose items come to about twice the cache, each
//! key's value 100 B to 4 KB: the store must keep more of what is read again, as it does
//! through the server against memcached (`benches/hit_ratio.sh`). One thread, fixed seeds,
//! a manual clock (the store's hash keys differ between runs, which moves its figure by
//! about 0.0003).

use mcb_core::store::{Config, ManualClock, Store, StoreOp};
use std::collections::{BTreeMap, HashMap};

const CACHE: usize = 16 << 20;
const KEYS: usize = CACHE * 2 / 2_150;
const STEPS: usize = 600_000;
/// What an item costs the LRU beside its key and value (about memcached's item header).
const LRU_HEADER: usize = 48;

/// `count` draws from Zipf(0.99) over `0..n` (inverse CDF over a xorshift generator).
fn zipf(n: usize, count: usize, mut seed: u64) -> Vec<u32> {
    let mut cdf: Vec<f64> = (1..=n).map(|rank| 1.0 / (rank as f64).powf(0.99)).collect();
    let mut sum = 0.0;
    for weight in &mut cdf {
        sum += *weight;
        *weight = sum;
    }
    (0..count)
        .map(|_| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let u = (seed >> 11) as f64 / (1u64 << 53) as f64 * sum;
            cdf.partition_point(|&c| c < u) as u32
        })
        .collect()
}

fn key(n: u32) -> String {
    format!("key:{n}")
}

/// Key `n`'s value length, fixed per key.
fn value_len(n: u32) -> usize {
    100 + ((u64::from(n).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 40) % 3_997) as usize
}

/// An exact LRU of `budget` bytes (key, value and `LRU_HEADER` per item).
#[derive(Default)]
struct Lru {
    budget: usize,
    used: usize,
    tick: u64,
    items: HashMap<u32, (u64, usize)>,
    order: BTreeMap<u64, u32>,
}

impl Lru {
    fn get(&mut self, n: u32) -> bool {
        let Some((at, _)) = self.items.get_mut(&n) else {
            return false;
        };
        self.order.remove(at);
        self.tick += 1;
        *at = self.tick;
        self.order.insert(self.tick, n);
        true
    }

    fn set(&mut self, n: u32) {
        let size = key(n).len() + value_len(n) + LRU_HEADER;
        while self.used + size > self.budget {
            let (_, old) = self.order.pop_first().expect("an item to evict");
            self.used -= self.items.remove(&old).expect("listed").1;
        }
        self.tick += 1;
        self.items.insert(n, (self.tick, size));
        self.order.insert(self.tick, n);
        self.used += size;
    }
}

/// The hit ratio over the second half of the loop, for a cache of `get` and `set`.
fn hit_ratio(trace: &[u32], mut get: impl FnMut(u32) -> bool, mut set: impl FnMut(u32)) -> f64 {
    let mut hits = 0;
    for (step, &n) in trace.iter().enumerate() {
        let hit = get(n);
        if !hit {
            set(n);
        }
        if hit && step >= trace.len() / 2 {
            hits += 1;
        }
    }
    hits as f64 / (trace.len() - trace.len() / 2) as f64
}

#[test]
fn eviction_keeps_more_of_what_is_read_than_an_exact_lru_of_the_same_bytes() {
    let trace = zipf(KEYS, STEPS, 0x51_7cc1_b727_220b);
    let config = Config {
        cache_size: CACHE,
        segment_size: 256 << 10,
        lanes: 1,
        ..Config::default()
    };
    let store = Store::new(config, Box::new(ManualClock::new(1))).expect("a store");
    let values = vec![b'v'; 4_096];
    let ours = hit_ratio(
        &trace,
        |n| store.get(key(n).as_bytes()).is_some(),
        |n| {
            let item = store
                .item(key(n).as_bytes(), &values[..value_len(n)], 0, 0)
                .expect("room");
            store.store(&item, StoreOp::Set).expect("stored");
        },
    );
    let lru = std::cell::RefCell::new(Lru {
        budget: CACHE,
        ..Lru::default()
    });
    let exact = hit_ratio(
        &trace,
        |n| lru.borrow_mut().get(n),
        |n| lru.borrow_mut().set(n),
    );
    println!("hit ratio: ours {ours:.4}, exact LRU {exact:.4}");
    // 0.921 against 0.898 here; 0.911 when an eviction kept large items read once as it
    // keeps small ones (`ONCE_READ_SIZE`).
    assert!(
        ours > exact + 0.02,
        "hit ratio ours {ours:.4}, an exact LRU of the same bytes {exact:.4}"
    );
}
