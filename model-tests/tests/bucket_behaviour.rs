//! The seed's bucket rules, one test each, on the real threads (no loom).

#![cfg(not(mcb_loom))] // real threads; the loom build runs tests/bucket.rs

use mcb_core::bucket::{
    Config, Connection, CreateError, DeleteError, Fate, HeldItems, Registry, ReserveError, State,
};
use mcb_model_tests::fixtures::{TestEnv, FAILING_CONFIG, MISSING_ENGINE};
use std::sync::Arc;

fn registry(config: Config) -> (TestEnv, Registry<TestEnv>) {
    let env = TestEnv::new();
    let registry = Registry::new(env.clone(), config).expect("registry");
    (env, registry)
}

fn plain() -> (TestEnv, Registry<TestEnv>) {
    registry(Config {
        engine: "test.so".into(),
        ..Config::default()
    })
}

/// Waits for the shutdown worker of a deleted bucket to notify `cookie`.
fn wait_notified(env: &TestEnv, cookie: u32) {
    env.events()
        .wait_for(&format!("delete of cookie {cookie} completes"), |events| {
            events.notified().contains(&cookie)
        });
}

#[test]
fn create_find_list_and_names() {
    let (_env, registry) = plain();
    let a = registry.create("a", "test.so", "").expect("create a");
    assert_eq!(a.state(), State::Running);
    assert_eq!(a.name(), "a");
    drop(registry.create("b", "test.so", "").expect("create b"));
    assert_eq!(registry.find("a").expect("find a").name(), "a");
    assert!(registry.find("nope").is_none());
    let mut names: Vec<_> = registry
        .list()
        .iter()
        .map(|b| b.name().to_owned())
        .collect();
    names.sort();
    assert_eq!(names, ["a", "b"]);
}

#[test]
fn create_refuses_bad_names_duplicates_and_failing_engines() {
    let (env, registry) = plain();
    assert!(matches!(
        registry.create("a b", "test.so", ""),
        Err(CreateError::InvalidName(_))
    ));
    assert!(matches!(
        registry.create("", "test.so", ""),
        Err(CreateError::InvalidName(_))
    ));
    drop(registry.create("a", "test.so", "").expect("create"));
    let exists = registry.create("a", "test.so", "").expect_err("duplicate");
    assert_eq!(exists, CreateError::Exists(State::Running));
    assert_eq!(exists.to_string(), "Bucket exists: running");
    assert!(matches!(
        registry.create("m", MISSING_ENGINE, ""),
        Err(CreateError::Load(why)) if why.contains(MISSING_ENGINE)
    ));
    let init = registry
        .create("f", "test.so", FAILING_CONFIG)
        .expect_err("init fails");
    assert!(
        init.to_string()
            .starts_with("Failed to initialize instance: "),
        "{init}"
    );
    // The failed buckets left no trace: the names are free again, their engines destroyed.
    assert!(registry.find("f").is_none());
    drop(
        registry
            .create("f", "test.so", "")
            .expect("name is free again"),
    );
    // Loaded: a, the duplicate's engine, f (failed), f; destroyed: the duplicate's and failed f.
    assert_eq!(env.events().loaded(), 4);
    assert_eq!(env.events().destroyed(), 2);
}

#[test]
fn delete_stops_notifies_unlinks_and_frees_the_name() {
    let (env, registry) = plain();
    let bucket = registry.create("a", "test.so", "").expect("create");
    // Weak, so that the worker's drop of the handle frees it (and drops its engine).
    let handle = std::sync::Arc::downgrade(bucket.arc());
    registry.delete("a", 42, true).expect("delete");
    assert!(bucket.force_shutdown());
    // Stopping: no new calls, not found, not listed, but a second delete is "not found".
    let strong = handle.upgrade().expect("our reference pins it");
    assert!(registry.enter(&strong).is_none());
    drop(strong);
    assert!(registry.find("a").is_none());
    assert!(registry.list().is_empty());
    assert_eq!(registry.delete("a", 43, false), Err(DeleteError::NotFound));
    wait_notified(&env, 42);
    assert_eq!(env.events().destroyed(), 1);
    // The name is free while our reference still pins the old handle, which is not freed.
    drop(registry.create("a", "test.so", "").expect("recreate"));
    assert_eq!(bucket.state(), State::Stopped);
    assert_eq!(env.events().dropped(), 0, "freed while referenced");
    drop(bucket);
    // The worker frees the bucket once the last reference is gone: its engine is dropped.
    env.events()
        .wait_for("the worker frees the bucket", |events| {
            events.dropped() == 1
        });
    assert!(handle.upgrade().is_none(), "freed, so nothing holds it");
}

#[test]
fn delete_waits_for_calls_in_flight() {
    let (env, registry) = plain();
    let bucket = registry.create("a", "test.so", "").expect("create");
    let lease = registry.enter(bucket.arc()).expect("running");
    registry.delete("a", 1, false).expect("delete");
    // The shutdown worker starts only when the last caller leaves STOPPING for STOPPED (the
    // interleavings of that handshake are the loom models' job): while the call is inside, the
    // bucket stays STOPPING, so nothing can have destroyed it, and the call still reaches it.
    assert_eq!(bucket.state(), State::Stopping);
    assert_eq!(lease.call(), 1, "the engine refuses calls after destroy");
    assert_eq!(bucket.state(), State::Stopping);
    assert_eq!(env.events().destroyed(), 0, "destroyed with a call inside");
    drop(lease);
    wait_notified(&env, 1);
    assert_eq!(env.events().destroyed(), 1);
}

#[test]
fn global_destroy_with_connections_still_attached() {
    let (env, registry) = plain();
    let conn = Connection::connect(&registry);
    drop(conn); // never disconnected: the host forgot it; destroy must not wait for it
    let held = registry.create("a", "test.so", "").expect("create");
    drop(registry.create("b", "test.so", "").expect("create"));
    registry.delete("a", 9, false).expect("delete");
    registry.destroy();
    registry.destroy(); // idempotent
    assert_eq!(env.events().destroyed(), 2);
    assert_eq!(held.state(), State::Null);
    assert!(registry.find("b").is_none());
    assert_eq!(
        registry.create("c", "test.so", "").map(drop),
        Err(CreateError::ShuttingDown)
    );
}

#[test]
fn connect_uses_the_default_bucket_or_the_named_default() {
    let (_env, with_default) = registry(Config {
        engine: "test.so".into(),
        default_bucket: true,
        ..Config::default()
    });
    let conn = Connection::connect(&with_default);
    assert_eq!(conn.bucket().map(|b| b.name()), Some(""));
    assert_eq!(conn.enter(&with_default).expect("default serves").call(), 1);
    assert_eq!(conn.disconnect(&with_default, 1), Fate::Free);

    let (_env, named) = registry(Config {
        engine: "test.so".into(),
        default_bucket_name: Some("main".into()),
        ..Config::default()
    });
    let conn = Connection::connect(&named);
    assert_eq!(
        conn.bucket().map(|b| b.name()),
        Some("main"),
        "auto-created"
    );
    assert_eq!(conn.disconnect(&named, 1), Fate::Free);

    let (_env, strict) = registry(Config {
        engine: "test.so".into(),
        default_bucket_name: Some("main".into()),
        auto_create: false,
        ..Config::default()
    });
    let conn = Connection::connect(&strict);
    assert!(conn.bucket().is_none());
    assert!(
        conn.enter(&strict).is_none(),
        "no bucket, no default: disconnect"
    );
    assert_eq!(conn.disconnect(&strict, 1), Fate::Free);
}

#[test]
fn auth_select_and_the_try_form() {
    let (_env, registry) = registry(Config {
        engine: "test.so".into(),
        default_bucket: true,
        ..Config::default()
    });
    let mut conn = Connection::connect(&registry);
    conn.authenticate(&registry, "alice", Some(""))
        .expect("not reserved");
    assert_eq!(
        conn.bucket().map(|b| b.name()),
        Some("alice"),
        "auto-created for the user"
    );
    assert_eq!(conn.select(&registry, "bob"), Ok(false));
    assert!(
        conn.bucket().is_none(),
        "a failed select detaches, as in the seed"
    );
    assert!(
        conn.try_enter(&registry).is_none(),
        "the try form never uses the default"
    );
    assert!(
        conn.enter(&registry).is_some(),
        "the plain form falls back to the default"
    );
    assert_eq!(conn.select(&registry, "alice"), Ok(true));
    let alice = registry.find("alice").expect("alice");
    conn.detach_from(&alice).expect("not reserved");
    assert!(conn.bucket().is_none());
    assert_eq!(conn.disconnect(&registry, 1), Fate::Free);
}

#[test]
fn disconnect_is_forwarded_and_references_balance() {
    let (env, registry) = plain();
    let bucket = registry.create("a", "test.so", "").expect("create");
    assert_eq!(bucket.refcount(), 2, "the registry's and ours");
    let conn = Connection::attached(registry.find("a"));
    assert_eq!(bucket.refcount(), 3);
    assert_eq!(conn.disconnect(&registry, 5), Fate::Free);
    assert_eq!(env.events().disconnects(), 1);
    assert_eq!(bucket.refcount(), 2);
}

#[test]
fn reservations_outlive_disconnect_and_the_last_release_frees() {
    let (_env, registry) = plain();
    let bucket = registry.create("a", "test.so", "").expect("create");
    let mut conn = Connection::attached(registry.find("a"));
    conn.reserve(&registry).expect("reserve");
    conn.reserve(&registry).expect("reserve");
    assert_eq!(conn.reservations(), 2);
    assert_eq!(
        bucket.refcount(),
        5,
        "registry, ours, connection, two reservations"
    );
    assert_eq!(conn.attach(None), Err(ReserveError::Reserved));
    assert_eq!(conn.release(&registry), Ok(Fate::Keep));
    assert_eq!(conn.disconnect(&registry, 1), Fate::Keep, "still reserved");
    assert_eq!(
        bucket.refcount(),
        3,
        "the connection's own reference went at disconnect"
    );
    assert_eq!(conn.release(&registry), Ok(Fate::Free));
    assert_eq!(conn.release(&registry), Err(ReserveError::NotReserved));
    assert_eq!(bucket.refcount(), 2);
}

#[test]
fn reserve_needs_a_running_bucket() {
    let (env, registry) = plain();
    let conn = Connection::<mcb_model_tests::fixtures::TestEngine>::attached(None);
    assert_eq!(conn.reserve(&registry), Err(ReserveError::NoBucket));
    let conn = Connection::attached(Some(registry.create("a", "test.so", "").expect("create")));
    registry.delete("a", 3, false).expect("delete");
    assert_eq!(conn.reserve(&registry), Err(ReserveError::NotRunning));
    assert_eq!(conn.disconnect(&registry, 3), Fate::Free);
    wait_notified(&env, 3);
}

#[test]
fn delete_under_load_from_many_threads() {
    let (env, registry) = plain();
    let keep = registry.create("keep", "test.so", "").expect("create");
    let doomed = registry.create("doomed", "test.so", "").expect("create");
    std::thread::scope(|s| {
        for _ in 0..4 {
            let (registry, keep, doomed) = (&registry, keep.arc(), doomed.arc());
            s.spawn(move || {
                for _ in 0..2_000 {
                    registry.enter(keep).expect("keep keeps running").call();
                    if let Some(engine) = registry.enter(doomed) {
                        engine.call();
                    }
                }
            });
        }
        registry.delete("doomed", 77, false).expect("delete");
    });
    wait_notified(&env, 77);
    let served = registry.enter(keep.arc()).expect("running").call();
    assert_eq!(served, 8_001, "no call on the other bucket was lost");
    assert_eq!(env.events().destroyed(), 1);
}

/// An item handed out (a hold) does not delay the delete: the bucket goes at once, its name
/// is free for a bucket of its own, and the engine is destroyed when the last hold is dropped,
/// still answering the holds until then (the seed's testapp "delete bucket" keeps an item).
#[test]
fn a_delete_completes_with_holds_out_and_the_last_hold_lets_the_engine_go() {
    let (env, registry) = plain();
    let bucket = registry.create("a", "test.so", "").expect("create");
    let first = registry.enter(bucket.arc()).expect("running").into_hold();
    let second = registry.enter(bucket.arc()).expect("running").into_hold();
    assert_eq!(
        (bucket.holds(), bucket.clients()),
        (2, 0),
        "holds are not calls"
    );
    registry.delete("a", 1, true).expect("delete");
    wait_notified(&env, 1);
    assert_eq!(bucket.state(), State::Stopped);
    assert!(registry.find("a").is_none());
    assert!(registry.list().is_empty());
    assert!(registry.enter(bucket.arc()).is_none(), "no new calls");
    assert_eq!(registry.delete("a", 2, false), Err(DeleteError::NotFound));
    let again = registry
        .create("a", "test.so", "")
        .expect("the name is free");
    assert_eq!(
        again.holds(),
        0,
        "the new bucket shares nothing with the old"
    );
    assert_eq!(
        first.engine().read_item(),
        1,
        "the held engine still answers"
    );
    drop(first);
    assert_eq!(
        second.engine().read_item(),
        2,
        "and still after the first hold went"
    );
    assert_eq!(env.events().destroyed(), 0, "destroyed under a hold");
    drop(second);
    env.events()
        .wait_for("the last hold lets the engine go", |events| {
            events.destroyed() == 1
        });
    assert_eq!(
        env.events().forced(),
        1,
        "the delete's force reaches the destroy"
    );
    let fresh = registry.enter(again.arc()).expect("running").call();
    assert_eq!(fresh, 1, "the new bucket's engine is another one");
}

/// Global destroy comes before the last hold: it destroys the held engine (once), and the
/// hold dropped afterwards destroys nothing (the seed's testapp "delete bucket shutdwn race").
#[test]
fn global_destroy_destroys_a_held_engine_once() {
    let (env, registry) = plain();
    let deleted = registry.create("a", "test.so", "").expect("create");
    let kept = registry.create("b", "test.so", "").expect("create");
    let of_deleted = registry.enter(deleted.arc()).expect("running").into_hold();
    let of_kept = registry.enter(kept.arc()).expect("running").into_hold();
    registry.delete("a", 1, false).expect("delete");
    wait_notified(&env, 1);
    assert_eq!(env.events().destroyed(), 0, "destroyed under a hold");
    registry.destroy();
    assert_eq!(
        env.events().destroyed(),
        2,
        "both engines, the held ones included"
    );
    drop(of_deleted);
    drop(of_kept);
    assert_eq!(
        env.events().destroyed(),
        2,
        "destroyed again by a late hold"
    );
}

/// A connection's held items each reach the engine that made them, across a delete of one
/// bucket: its engine is destroyed once its last item came back, the other bucket's items are
/// untouched, and items left in the list give their holds back when it is dropped.
#[test]
fn held_items_reach_their_engines_and_keep_them_through_a_delete() {
    let (env, registry) = plain();
    let a = registry.create("a", "test.so", "").expect("create");
    let b = registry.create("b", "test.so", "").expect("create");
    let mut held = HeldItems::new();
    for item in [10, 11] {
        held.add(item, registry.enter(a.arc()).expect("running"));
    }
    held.add(20, registry.enter(b.arc()).expect("running"));
    assert_eq!((held.len(), a.holds(), b.holds()), (3, 2, 1));
    // The test engines count their calls: each item reaches its own engine.
    for _ in 0..5 {
        registry.enter(b.arc()).expect("running").call();
    }
    assert_eq!(held.with(20, |e| e.calls()), Some(5));
    assert_eq!(held.with(11, |e| e.calls()), Some(0));
    assert_eq!(held.with(99, |e| e.calls()), None, "an item not held here");
    registry.delete("a", 1, false).expect("delete");
    wait_notified(&env, 1);
    assert_eq!(held.release(10, |e| e.read_item() > 0), Some(true));
    assert_eq!(env.events().destroyed(), 0, "destroyed under a held item");
    assert_eq!(held.release(10, |_| ()), None, "given back twice");
    assert_eq!(held.release(11, |e| e.read_item() > 0), Some(true));
    env.events()
        .wait_for("the last held item lets the engine go", |events| {
            events.destroyed() == 1
        });
    assert_eq!((held.len(), a.holds(), b.holds()), (1, 0, 1));
    drop(held);
    assert_eq!(b.holds(), 0, "the dropped list gave its hold back");
}

/// A get from a connection's usual bucket writes nothing shared with other connections'
/// gets: after the first item, a hold and its give-back leave the bucket's `Arc` count as it
/// was (the list keeps one `Arc` for the bucket while it is RUNNING), and it goes once the
/// bucket stops.
#[test]
fn held_items_keep_one_reference_to_the_usual_bucket() {
    let (env, registry) = plain();
    let a = registry.create("a", "test.so", "").expect("create");
    let mut held = HeldItems::new();
    let before = Arc::strong_count(a.arc());
    held.add(1, registry.enter(a.arc()).expect("running"));
    assert_eq!(held.release(1, |_| ()), Some(()));
    let kept = Arc::strong_count(a.arc());
    assert_eq!(kept, before + 1, "the list keeps the bucket");
    for item in 2..100 {
        held.add(item, registry.enter(a.arc()).expect("running"));
        assert_eq!(Arc::strong_count(a.arc()), kept, "a get cloned the bucket");
        assert_eq!(held.release(item, |_| ()), Some(()));
    }
    assert_eq!((a.holds(), Arc::strong_count(a.arc())), (0, kept));
    // Items of another bucket: the idle one is let go when the list takes the new one.
    let b = registry.create("b", "test.so", "").expect("create");
    held.add(7, registry.enter(b.arc()).expect("running"));
    assert_eq!(
        Arc::strong_count(a.arc()),
        before,
        "the idle bucket outlived its use"
    );
    // A bucket that stops while an item of it is held is let go with that item.
    registry.delete("b", 2, false).expect("delete");
    wait_notified(&env, 2);
    let b_kept = Arc::strong_count(b.arc());
    assert_eq!(held.release(7, |_| ()), Some(()));
    assert_eq!(Arc::strong_count(b.arc()), b_kept - 1);
    assert!(held.is_empty());
}
