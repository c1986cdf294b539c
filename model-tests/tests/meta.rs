//! loom model of the meta protocol's recache token (`mcb_core::store::meta`): concurrent
//! fetches of a stale item hand the token to exactly one of them; run on the real code
//! (`check`) and on a check-then-take variant that the model must reject (`caught`).

#![cfg(mcb_loom)]

use mcb_core::store::Item;
use mcb_core::sync::atomic::{AtomicUsize, Ordering};
use mcb_core::sync::mutant::Mutant;
use mcb_core::sync::{thread, Arc};
use mcb_model_tests::{caught, check};

/// Three clients fetch one stale item at once and each asks for the token (`Item::take_token`,
/// what `Store::meta_get` calls for a stale item): exactly one wins (W), the others are told
/// someone did (Z), and a later fetch in the same period loses too. (The item alone: the
/// store's L2 under three threads exceeds loom's branch bound; `meta_get` takes the token on
/// the item it found, so the rule is the item's.)
fn one_winner_per_stale_period() {
    let item = Arc::new(Item::<Box<[u8]>>::new(b"k", b"v", 0, 0));
    let winners = Arc::new(AtomicUsize::new(0));
    let fetch = |item: Arc<Item>, winners: Arc<AtomicUsize>| {
        move || {
            if item.take_token() {
                // Relaxed: read after every thread joined.
                winners.fetch_add(1, Ordering::Relaxed);
            }
        }
    };
    let a = thread::spawn(fetch(item.clone(), winners.clone()));
    let b = thread::spawn(fetch(item.clone(), winners.clone()));
    fetch(item.clone(), winners.clone())();
    a.join().expect("fetch a");
    b.join().expect("fetch b");
    // Relaxed: every writer joined.
    let won = winners.load(Ordering::Relaxed);
    assert!(won <= 1, "two winners in one stale period");
    assert_eq!(won, 1, "nobody won the token");
    assert!(!item.take_token(), "a winner after the period was won");
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
