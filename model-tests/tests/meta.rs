//! loom model of the meta protocol's recache token (`mcb_core::store::meta`): concurrent
//! fetches of a stale item hand the token to exactly one of them; run on the real code
//! (`check`) and on a check-then-take variant that the model must reject (`caught`).

#![cfg(mcb_loom)]

use mcb_core::store::{Config, ManualClock, Store, StoreOp};
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

/// Three clients fetch one stale item at once and each asks for the token (`take_token`, what
/// `Store::meta_get` calls for a stale item): exactly one wins (W), the others are told someone
/// did (Z), and a later fetch in the same period loses too. (The item alone, held as the C
/// boundary holds it, by token: the whole meta get under three threads exceeds loom's branch
/// bound; `meta_get` takes the token on the item it found, so the rule is the item's.)
fn one_winner_per_stale_period() {
    let store = Arc::new(tiny_store());
    let item = store.item(b"k", b"v", 0, 0).expect("item");
    store.store(&item, StoreOp::Set).expect("stored");
    drop(item);
    let token = store.into_token(store.get(b"k").expect("stored"));
    let winners = Arc::new(AtomicUsize::new(0));
    let fetch = |store: Arc<Store>, winners: Arc<AtomicUsize>| {
        move || {
            if store.with_token(token, |item| item.take_token()) {
                // Relaxed: read after every thread joined.
                winners.fetch_add(1, Ordering::Relaxed);
            }
        }
    };
    let a = thread::spawn(fetch(store.clone(), winners.clone()));
    let b = thread::spawn(fetch(store.clone(), winners.clone()));
    fetch(store.clone(), winners.clone())();
    a.join().expect("fetch a");
    b.join().expect("fetch b");
    // Relaxed: every writer joined.
    let won = winners.load(Ordering::Relaxed);
    assert!(won <= 1, "two winners in one stale period");
    assert_eq!(won, 1, "nobody won the token");
    assert!(
        !store.with_token(token, |item| item.take_token()),
        "a winner after the period was won"
    );
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
