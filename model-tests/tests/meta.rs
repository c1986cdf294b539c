//! loom model of the meta protocol's recache token (`mcb_core::store::meta`): concurrent
//! fetches of a stale item hand the token to exactly one of them, also when they rewrite the
//! access stamp that shares its word; run on the real code (`check`) and on a check-then-take
//! variant that the model must reject (`caught`).

#![cfg(mcb_loom)]

use mcb_core::store::{Config, ManualClock, RelTime, Store, StoreOp};
use mcb_core::sync::atomic::{AtomicUsize, Ordering};
use mcb_core::sync::mutant::Mutant;
use mcb_core::sync::{thread, Arc};
use mcb_model_tests::{caught, check};

/// A store small enough for a model: a few 64-byte segments.
fn tiny_store() -> Store {
    let config = Config {
        cache_size: 512,
        item_size_max: 64,
        segment_size: 64,
        lanes: 1,
        ..Config::default()
    };
    Store::new(config, Box::new(ManualClock::new(1))).expect("a tiny store")
}

/// A store holding `k`, and the token of its item (held as the C boundary holds it).
fn stored_item() -> (Arc<Store>, u64) {
    let store = Arc::new(tiny_store());
    let item = store.item(b"k", b"v", 0, 0).expect("item");
    store.store(&item, StoreOp::Set).expect("stored");
    drop(item);
    let token = store.into_token(store.get(b"k").expect("stored"));
    (store, token)
}

/// One fetch per entry of `stamps` at once (the last on this thread), each of the item behind
/// `token`: it notes its access at that time, when given, then asks for the token (what
/// `Store::meta_get` does with a stale item). How many won it.
fn racing_fetches(store: &Arc<Store>, token: u64, stamps: &[Option<RelTime>]) -> usize {
    let winners = Arc::new(AtomicUsize::new(0));
    let fetch = |stamp: Option<RelTime>| {
        let (store, winners) = (store.clone(), winners.clone());
        move || {
            let won = store.with_token(token, |item| {
                if let Some(now) = stamp {
                    item.note_access(now);
                }
                item.take_token()
            });
            if won {
                // Relaxed: read after every thread joined.
                winners.fetch_add(1, Ordering::Relaxed);
            }
        }
    };
    let (last, others) = stamps.split_last().expect("a fetch");
    let threads: Vec<_> = others.iter().map(|&s| thread::spawn(fetch(s))).collect();
    fetch(*last)();
    for thread in threads {
        thread.join().expect("fetch");
    }
    // Relaxed: every writer joined.
    winners.load(Ordering::Relaxed)
}

/// Three clients fetch one stale item at once and each asks for the token (`take_token`, what
/// `Store::meta_get` calls for a stale item): exactly one wins (W), the others are told someone
/// did (Z), and a later fetch in the same period loses too. (The item alone, held as the C
/// boundary holds it, by token: the whole meta get under three threads exceeds loom's branch
/// bound; `meta_get` takes the token on the item it found, so the rule is the item's.)
fn one_winner_per_stale_period() {
    let (store, token) = stored_item();
    let won = racing_fetches(&store, token, &[None, None, None]);
    assert!(won <= 1, "two winners in one stale period");
    assert_eq!(won, 1, "nobody won the token");
    assert!(
        !store.with_token(token, |item| item.take_token()),
        "a winner after the period was won"
    );
    store.release_token(token);
}

/// Two fetches a minute apart (the item stored at 1): each rewrites the access stamp (the
/// first marks the item fetched, the second finds the stamp a minute old) in the word that
/// holds the token, then asks for the token. The stamp keeps the token bit whatever came
/// between its read and its write: exactly one wins.
fn access_stamp_keeps_the_token() {
    let (store, token) = stored_item();
    let won = racing_fetches(&store, token, &[Some(1), Some(61)]);
    assert!(won <= 1, "two winners across an access stamp");
    assert_eq!(won, 1, "nobody won the token");
    store.with_token(token, |item| {
        assert!(item.access().0, "the fetched mark lost");
    });
    store.release_token(token);
}

#[test]
fn meta_one_recache_winner() {
    check(one_winner_per_stale_period);
}

#[test]
fn meta_one_recache_winner_catches_check_then_take() {
    caught(
        Mutant::TokenCheckThenTake,
        "two winners in one stale period",
        one_winner_per_stale_period,
    );
}

#[test]
fn meta_access_stamp_keeps_the_token() {
    check(access_stamp_keeps_the_token);
}
