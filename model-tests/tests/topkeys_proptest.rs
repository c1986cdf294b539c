//! Random sequences of top-keys records, checked against a count per key: with room for every
//! key the stats equal the model; with less, at most `max_keys` keys are listed and each with
//! no more than the model's count. The shards' LRU lists pass their invariant walker
//! (`TopKeys::validate`) after every step.

#![cfg(not(mcb_loom))]

use mcb_core::bucket::topkeys::{TopKeyOp, TopKeys};
use proptest::prelude::*;
use std::collections::HashMap;

const KEYS: usize = 24;

fn counts(tk: &TopKeys) -> HashMap<Vec<u8>, u64> {
    let mut out = HashMap::new();
    tk.stats(0, &mut |key, value| {
        let hits = value
            .split(',')
            .find_map(|kv| kv.strip_prefix("get_hits="))
            .expect("get_hits listed")
            .parse()
            .expect("a number");
        assert!(out.insert(key.to_vec(), hits).is_none(), "key listed twice");
    });
    out
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn top_keys_match_a_count_per_key(
        max_keys in prop_oneof![1usize..40, Just(8 * KEYS)],
        keys in proptest::collection::vec(0..KEYS, 1..200),
    ) {
        let tk = TopKeys::new(max_keys);
        let mut model: HashMap<Vec<u8>, u64> = HashMap::new();
        for key in keys {
            let key = format!("k{key}").into_bytes();
            tk.record(&key, TopKeyOp::GetHits, 0);
            *model.entry(key).or_default() += 1;
            tk.validate();
            prop_assert!(tk.len() <= max_keys);
        }
        let listed = counts(&tk);
        prop_assert_eq!(listed.len(), tk.len());
        if max_keys >= 8 * KEYS {
            // Each of the 8 shards has room for every key: nothing was evicted.
            prop_assert_eq!(listed, model);
        } else {
            for (key, count) in listed {
                prop_assert!(count <= model[&key], "more counted than recorded");
            }
        }
    }
}
