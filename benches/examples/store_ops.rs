//! One kind of item-store operation, repeated: the driver to profile with callgrind, whose
//! instruction counts do not depend on the machine's load (criterion's times do).
//!
//! `store_ops KIND N`: fills a 64 MiB store with 10,000 items of 100 bytes, then runs N
//! operations of KIND on uniformly drawn keys: `get` (the engine's fetch: a counted hold, as for
//! a foreign host, and the access noted), `pinned` (a pin and a get within it, no hold), `token`
//! (what the engine's `get`, `get_item_info` and `release` do: a fetch turned into a token, the
//! token's item read for every field `item_info` carries, the token released), `set`, or `none`
//! (the loop alone: subtract it). Instructions per operation: (Ir of KIND - Ir of
//! none) / N. `evicting N` is the storage bench's evicting regime instead (a fetch, and on a
//! miss a set, over its Zipf 0.99 trace, the store holding half the keys drawn), after a pass
//! over the trace: take the difference of two counts.
//!
//!     valgrind --tool=callgrind target/release/examples/store_ops pinned 200000

use mcb_benches::Rng;
use mcb_core::store::{Config, ManualClock, Store, StoreOp};
use std::hint::black_box;

const KEYS: u64 = 10_000;
const VALUE: [u8; 100] = [b'v'; 100];

fn main() {
    let mut args = std::env::args().skip(1);
    let kind = args.next().unwrap_or_else(|| "get".into());
    let n: u64 = args
        .next()
        .map_or(1_000_000, |n| n.parse().expect("a count"));
    if kind == "evicting" {
        return evicting(n as usize);
    }
    let config = Config {
        cache_size: 64 << 20,
        ..Config::default()
    };
    let store = Store::new(config, Box::new(ManualClock::new(1))).expect("store");
    let keys: Vec<Vec<u8>> = (0..KEYS)
        .map(|k| format!("key:{k:08}").into_bytes())
        .collect();
    let set = |key: &[u8]| {
        let item = store.item(key, &VALUE, 0, 0).expect("item");
        black_box(store.store(&item, StoreOp::Set).expect("stored"));
    };
    keys.iter().for_each(|key| set(key));
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut hits = 0u64;
    for _ in 0..n {
        let key = &keys[(rng.next_u64() % KEYS) as usize];
        hits += match kind.as_str() {
            "get" => u64::from(black_box(store.fetch(key)).is_some()),
            "pinned" => {
                let pin = store.pin();
                let hit = black_box(store.get_pinned(&pin, key)).is_some();
                u64::from(hit)
            }
            "token" => match store.fetch(key) {
                Some(item) => {
                    let token = store.into_token(item);
                    let info = store.with_token(black_box(token), |item| {
                        let fields = (item.cas(), item.exptime(), item.flags());
                        (item.raw_parts(), fields, item.key_len(), item.value_len())
                    });
                    black_box(info);
                    store.release_token(token);
                    1
                }
                None => 0,
            },
            "set" => {
                set(key);
                1
            }
            "none" => black_box(key.len() as u64),
            other => panic!("unknown kind {other}: get, pinned, token, set or none"),
        };
    }
    println!("{kind}: {n} operations, {hits} hits (or key bytes)");
}

/// The storage bench's evicting regime (its trace, keys and sizing): a pass over the trace,
/// then `n` of its operations.
fn evicting(n: usize) {
    let trace = mcb_benches::zipf(1 << 20, 0.99, 1 << 21, 44);
    let mut distinct = trace.clone();
    distinct.sort_unstable();
    distinct.dedup();
    let bytes = (distinct.len() / 2 * (12 + 12 + VALUE.len())).next_multiple_of(1 << 20);
    let config = Config {
        cache_size: bytes,
        ..Config::default()
    };
    let store = Store::new(config, Box::new(ManualClock::new(1))).expect("store");
    let keys: Vec<Vec<u8>> = (0..1 << 20)
        .map(|i| format!("k{i:010}").into_bytes())
        .collect();
    let mut hits = 0usize;
    let mut op = |k: u64| {
        let key = &keys[k as usize];
        if black_box(store.fetch(key)).is_some() {
            hits += 1;
        } else {
            let item = store.item(key, &VALUE, 0, 0).expect("item");
            black_box(store.store(&item, StoreOp::Set).expect("stored"));
        }
    };
    trace.iter().for_each(|&k| op(k));
    trace.iter().cycle().take(n).for_each(|&k| op(k));
    println!("evicting: {n} operations after a pass, {hits} hits in all");
}
