//! loom models of the bucket lifecycle: the real `mcb_core::bucket` code, each proof next to the
//! deliberate bugs it must catch. Run with `cargo loom` (see the README).

#![cfg(mcb_loom)]

use loom::thread;
use mcb_core::bucket::{Config, Connection, CreateError, Fate, HeldItems, Lease, Registry, State};
use mcb_core::sync::mutant::Mutant;
use mcb_core::sync::Arc;
use mcb_model_tests::fixtures::{TestEngine, TestEnv};
use mcb_model_tests::{caught, check};
use std::mem::ManuallyDrop;

fn registry_with(name: &str) -> (TestEnv, Registry<TestEnv>) {
    let env = TestEnv::new();
    let registry = Registry::new(env.clone(), Config::default()).expect("registry");
    drop(registry.create(name, "test.so", "").expect("create"));
    (env, registry)
}

/// Enters the bucket and makes one call if it is RUNNING.
fn one_call(registry: &Registry<TestEnv>, handle: &Arc<mcb_core::bucket::Handle<TestEngine>>) {
    if let Some(engine) = registry.enter(handle) {
        engine.call();
    }
}

// ---- Proof 1: a client that entered never sees STOPPED; STOPPED never while a lease is held.

fn client_races_delete() {
    let (env, registry) = registry_with("b");
    let bucket = registry.find("b").expect("running");
    let handle = Arc::clone(bucket.arc());
    drop(bucket); // only the registry's reference is left

    let deleter = {
        let registry = registry.clone();
        thread::spawn(move || registry.delete("b", 7, false).expect("delete"))
    };
    one_call(&registry, &handle);
    deleter.join().unwrap();
    // Whoever left last, the client backing out among them, started the shutdown.
    registry.join_shutdowns();
    assert_eq!(env.events().notified(), [7], "the delete never completed");
    registry.destroy();
    assert_eq!(env.events().destroyed(), 1);
}

#[test]
fn bucket_client_never_sees_stopped() {
    check(client_races_delete);
}

#[test]
fn bucket_client_never_sees_stopped_broken_check_before_count() {
    caught(
        Mutant::EnterChecksBeforeCounting,
        "engine called after destroy",
        client_races_delete,
    );
}

#[test]
fn bucket_client_never_sees_stopped_broken_no_store_load_order() {
    caught(
        Mutant::NoStoreLoadFence,
        "engine called after destroy",
        client_races_delete,
    );
}

#[test]
fn bucket_client_never_sees_stopped_broken_relaxed_increment() {
    caught(
        Mutant::EnterCountsRelaxed,
        "engine called after destroy",
        client_races_delete,
    );
}

#[test]
fn bucket_client_never_sees_stopped_broken_acquire_state_load() {
    caught(
        Mutant::EnterLoadsStateAcquire,
        "engine called after destroy",
        client_races_delete,
    );
}

#[test]
fn bucket_client_never_sees_stopped_broken_back_out_skips_stop() {
    caught(
        Mutant::BackOutSkipsStop,
        "the delete never completed",
        client_races_delete,
    );
}

#[test]
fn bucket_client_never_sees_stopped_broken_own_stripe_only() {
    caught(
        Mutant::LeaveReadsOwnStripeOnly,
        "engine called after destroy",
        client_races_delete,
    );
}

// ---- Proof 2: STOPPING to STOPPED exactly once, one shutdown, whoever leaves last.

fn two_leavers_race_the_stopper() {
    let (env, registry) = registry_with("b");
    let bucket = registry.find("b").expect("running");
    let handle = Arc::clone(bucket.arc());
    drop(bucket);

    let clients: Vec<_> = (0..2)
        .map(|_| {
            let registry = registry.clone();
            let handle = Arc::clone(&handle);
            thread::spawn(move || one_call(&registry, &handle))
        })
        .collect();
    registry.delete("b", 7, false).expect("delete");
    for client in clients {
        client.join().unwrap();
    }
    // Whoever left last started the shutdown: the delete completes before global destroy.
    registry.join_shutdowns();
    assert_eq!(env.events().notified(), [7], "the delete never completed");
    registry.destroy();
    assert_eq!(
        env.events().destroyed(),
        1,
        "engine destroyed {} times",
        env.events().destroyed()
    );
    assert!(env.events().notified().len() <= 1);
}

#[test]
fn bucket_stops_exactly_once() {
    check(two_leavers_race_the_stopper);
}

#[test]
fn bucket_stops_exactly_once_broken_release_decrement() {
    caught(
        Mutant::LeaveUncountsRelease,
        "the delete never completed",
        two_leavers_race_the_stopper,
    );
}

#[test]
fn bucket_stops_exactly_once_broken_store_instead_of_cas() {
    caught(
        Mutant::StopWithoutCas,
        "destroyed twice",
        two_leavers_race_the_stopper,
    );
}

/// A lease taken on one thread is dropped on another (a host may finish a call elsewhere) while
/// the bucket is deleted: the lease's own stripe is counted out, so no stripe goes below zero
/// (a debug assertion) and the last leaver is not missed.
fn lease_dropped_elsewhere() {
    let (env, registry) = registry_with("b");
    let bucket = registry.find("b").expect("running");
    let handle = Arc::clone(bucket.arc());
    drop(bucket);
    let lease = registry.enter(&handle).expect("running");
    // SAFETY: only the lifetime changes: `registry` and `handle` outlive the lease, whose
    // thread is joined below before either goes.
    let lease: Lease<'static, TestEnv> = unsafe { std::mem::transmute(lease) };
    let dropper = thread::spawn(move || drop(lease));
    registry.delete("b", 7, false).expect("delete");
    dropper.join().unwrap();
    registry.join_shutdowns();
    assert_eq!(env.events().notified(), [7], "the delete never completed");
    registry.destroy();
}

#[test]
fn bucket_lease_dropped_on_another_thread() {
    check(lease_dropped_elsewhere);
}

#[test]
fn bucket_lease_dropped_on_another_thread_broken_callers_stripe() {
    caught(
        Mutant::LeaveFromCallersStripe,
        "leave without enter",
        lease_dropped_elsewhere,
    );
}

// ---- Proof 3: no missed wake-up; global destroy finishes with a reference still held.

/// A connection drops the last reference while the shutdown worker waits for it. If the worker
/// missed the wake-up it would sleep forever and loom reports a deadlock.
fn last_reference_races_worker() {
    let (env, registry) = registry_with("b");
    let connection = registry.find("b").expect("running");
    let releaser = thread::spawn(move || drop(connection));
    registry.delete("b", 7, false).expect("delete");
    releaser.join().unwrap();
    // No global destroy: only the release can wake the worker; if it missed the wake-up, this
    // join never returns and loom reports a deadlock.
    registry.join_shutdowns();
    assert_eq!(env.events().destroyed(), 1);
}

#[test]
fn bucket_no_missed_wakeup() {
    check(last_reference_races_worker);
}

#[test]
fn bucket_no_missed_wakeup_broken_unlocked_notify() {
    caught(
        Mutant::ReleaseWakesWithoutLock,
        "deadlock",
        last_reference_races_worker,
    );
}

#[test]
fn bucket_no_missed_wakeup_broken_no_recheck() {
    caught(
        Mutant::WorkerWaitsWithoutRecheck,
        "deadlock",
        last_reference_races_worker,
    );
}

/// The seed's "delete bucket shutdown race": a connection still holds a reference when global
/// destroy runs; destroy must neither hang nor destroy the engine twice.
#[test]
fn bucket_global_destroy_with_reference_held() {
    check(|| {
        let (env, registry) = registry_with("b");
        let connection = registry.find("b").expect("running");
        let deleter = {
            let registry = registry.clone();
            // NotFound when global destroy came first.
            thread::spawn(move || registry.delete("b", 7, false).is_ok())
        };
        registry.destroy();
        let deleted = deleter.join().unwrap();
        assert_eq!(
            connection.state(),
            State::Null,
            "destroy frees what is left"
        );
        drop(connection);
        assert_eq!(env.events().destroyed(), 1);
        assert!(env.events().notified().len() <= usize::from(deleted));
    });
}

// ---- Proof 4: a connection's state is freed exactly once (disconnect, reserve, release).

fn disconnect_races_release() {
    let (env, registry) = registry_with("b");
    let connection = Arc::new(Connection::attached(registry.find("b")));
    connection.reserve(&registry).expect("reserve");
    let releaser = {
        let (registry, connection) = (registry.clone(), Arc::clone(&connection));
        thread::spawn(move || connection.release(&registry).expect("reserved"))
    };
    let by_disconnect = connection.disconnect(&registry, 1);
    let by_release = releaser.join().unwrap();
    let frees = [by_disconnect, by_release]
        .iter()
        .filter(|f| **f == Fate::Free)
        .count();
    assert_eq!(frees, 1, "connection state freed {frees} times");
    assert_eq!(env.events().disconnects(), 1);
    let bucket = registry.find("b").expect("still running");
    assert_eq!(
        bucket.refcount(),
        2,
        "only the registry's and this lookup's references remain"
    );
    drop(bucket);
    registry.destroy();
}

#[test]
fn bucket_connection_freed_once() {
    check(disconnect_races_release);
}

#[test]
fn bucket_connection_freed_once_broken_ignores_reservations() {
    caught(
        Mutant::DisconnectIgnoresReservations,
        "freed 2 times",
        disconnect_races_release,
    );
}

/// A host's connection state, freed by whoever is told [`Fate::Free`]. `live` is a loom cell:
/// each user's access is recorded when it takes the connection, and loom reports the free
/// unless it happens after every such access (so a user the freer did not synchronise with is
/// caught, not just a double free). The free runs the connection's destructor, whose mutable
/// access to the connection's (loom-watched) bucket loom checks against every read of it, even
/// one a user makes after taking the connection; the memory itself is kept until the slot
/// drops, after every thread is joined, so that such a late read is reported by loom instead of
/// reading freed memory in the test process.
struct Slot {
    live: loom::cell::UnsafeCell<bool>,
    connection: std::cell::UnsafeCell<ManuallyDrop<Connection<TestEngine>>>,
}

// SAFETY: the cell's accesses are checked by loom; the model frees the connection only on
// `Fate::Free`, after which no user touches it (the contract the model checks).
unsafe impl Sync for Slot {}
// SAFETY: as above.
unsafe impl Send for Slot {}

impl Slot {
    fn new(connection: Connection<TestEngine>) -> Self {
        Self {
            live: loom::cell::UnsafeCell::new(true),
            connection: std::cell::UnsafeCell::new(ManuallyDrop::new(connection)),
        }
    }

    /// The connection, for one user: the access loom checks the free against is recorded now.
    fn get(&self) -> &Connection<TestEngine> {
        // SAFETY: a read access that loom checks against the free's write.
        let live = self.live.with(|p| unsafe { *p });
        assert!(live, "connection used after it was freed");
        // SAFETY: the connection is dropped only by `free`, which loom checks happens after
        // this access, and its memory lives as long as `self`.
        unsafe { &*self.connection.get() }
    }

    fn free(&self, fate: Fate) {
        if fate == Fate::Free {
            // SAFETY: a write access that loom checks against every recorded read.
            let was_live = self
                .live
                .with_mut(|p| unsafe { std::mem::replace(&mut *p, false) });
            assert!(was_live, "connection freed twice");
            // SAFETY: dropped once (`live` is now false, so `get` refuses it); loom checks that
            // every user's access to it happened before (the destructor's, to its bucket).
            unsafe { ManuallyDrop::drop(&mut *self.connection.get()) };
        }
    }

    fn freed(&self) -> bool {
        // SAFETY: a read access, checked by loom.
        !self.live.with(|p| unsafe { *p })
    }
}

/// Two reservations are released on two threads while the connection disconnects on a third:
/// the state is freed exactly once, by the last user, after every other user's accesses.
fn two_releases_race_disconnect() {
    let (env, registry) = registry_with("b");
    let slot = Arc::new(Slot::new(Connection::attached(registry.find("b"))));
    for _ in 0..2 {
        slot.get().reserve(&registry).expect("reserve");
    }
    let releasers: Vec<_> = (0..2)
        .map(|_| {
            let (registry, slot) = (registry.clone(), Arc::clone(&slot));
            thread::spawn(move || {
                let fate = slot.get().release(&registry).expect("reserved");
                slot.free(fate);
            })
        })
        .collect();
    let fate = slot.get().disconnect(&registry, 1);
    slot.free(fate);
    for releaser in releasers {
        releaser.join().unwrap();
    }
    assert!(slot.freed(), "connection state never freed");
    assert_eq!(env.events().disconnects(), 1);
    let bucket = registry.find("b").expect("still running");
    assert_eq!(bucket.refcount(), 2, "a reservation's reference leaked");
    drop(bucket);
    registry.destroy();
}

#[test]
fn bucket_connection_freed_once_after_every_user() {
    check(two_releases_race_disconnect);
}

#[test]
fn bucket_connection_freed_once_broken_relaxed_release_cas() {
    caught(
        Mutant::ReleaseCasRelaxed,
        "Causality violation",
        two_releases_race_disconnect,
    );
}

#[test]
fn bucket_connection_freed_once_broken_release_after_disconnect() {
    caught(
        Mutant::DisconnectReleasesLate,
        "Causality violation",
        two_releases_race_disconnect,
    );
}

/// A handle is freed once and never entered after: a lookup racing the delete either fails or
/// holds the bucket alive (not freed) until it lets go.
#[test]
fn bucket_lookup_never_sees_freed_handle() {
    check(|| {
        let (env, registry) = registry_with("b");
        let finder = {
            let registry = registry.clone();
            thread::spawn(move || {
                if let Some(bucket) = registry.find("b") {
                    assert_ne!(bucket.state(), State::Null, "lookup of a freed bucket");
                }
            })
        };
        registry.delete("b", 7, false).expect("delete");
        finder.join().unwrap();
        registry.join_shutdowns();
        assert_eq!(env.events().notified(), [7]);
    });
}

// ---- Proof 5: concurrent creates of one name yield one bucket and one "exists".

fn two_creates_one_name() {
    let env = TestEnv::new();
    let registry = Registry::new(env.clone(), Config::default()).expect("registry");
    let other = {
        let registry = registry.clone();
        thread::spawn(move || registry.create("x", "test.so", "").map(drop))
    };
    let mine = registry.create("x", "test.so", "").map(drop);
    let theirs = other.join().unwrap();
    let created = [&mine, &theirs].iter().filter(|r| r.is_ok()).count();
    assert_eq!(created, 1, "two live buckets named x: {mine:?} {theirs:?}");
    assert!(
        [&mine, &theirs]
            .iter()
            .any(|r| matches!(r, Err(CreateError::Exists(_)))),
        "the loser must hear 'exists'"
    );
    registry.destroy();
}

#[test]
fn bucket_registry_one_bucket_per_name() {
    check(two_creates_one_name);
}

#[test]
fn bucket_registry_one_bucket_per_name_broken_check_outside_lock() {
    caught(
        Mutant::CreateChecksOutsideLock,
        "two live buckets",
        two_creates_one_name,
    );
}

/// A client looks the bucket up, enters it and calls it while it is being created: it finds
/// nothing, or finds it RUNNING with its initialisation visible (the test engine's initialize
/// writes with no ordering of its own, as a real engine's plain writes).
fn create_races_call() {
    let env = TestEnv::new();
    let registry = Registry::new(env.clone(), Config::default()).expect("registry");
    let client = {
        let registry = registry.clone();
        thread::spawn(move || {
            if let Some(bucket) = registry.find("x") {
                one_call(&registry, bucket.arc());
            }
        })
    };
    drop(registry.create("x", "test.so", "").expect("create"));
    client.join().unwrap();
    registry.destroy();
}

#[test]
fn bucket_create_publishes_initialised_engine() {
    check(create_races_call);
}

#[test]
fn bucket_create_publishes_initialised_engine_broken_relaxed_start() {
    caught(
        Mutant::StartStoresRelaxed,
        "engine called before initialize",
        create_races_call,
    );
}

// ---- Proof 6: a delete completes with an item held; its engine goes after the last hold.

/// Two gets racing the delete each hand out an item (the call, then the item held past it, as
/// a connection holds one while memcached sends it). The delete completes while the items are
/// out (each holder waits for its notification), the items still reach their engine
/// afterwards, and the engine is destroyed once, after the last came back: never while a call
/// or an item's use is inside (the test engine's item memory is a loom cell that destroy
/// writes and every such use reads).
fn hold_races_delete() {
    let (env, registry) = registry_with("b");
    let bucket = registry.find("b").expect("running");
    let handle = Arc::clone(bucket.arc());
    drop(bucket);
    let holders: Vec<_> = (0..2)
        .map(|_| {
            let (env, registry, handle) = (env.clone(), registry.clone(), Arc::clone(&handle));
            thread::spawn(move || {
                // The get: inside the bucket (its engine finds the item), then the item held
                // past the call.
                let Some(lease) = registry.enter(&handle) else {
                    return; // the delete came first
                };
                lease.read_item();
                let hold = lease.into_hold();
                env.events().await_notified(7);
                hold.engine().read_item();
                drop(hold);
            })
        })
        .collect();
    registry.delete("b", 7, false).expect("delete");
    for holder in holders {
        holder.join().unwrap();
    }
    registry.join_shutdowns();
    assert_eq!(env.events().notified(), [7], "the delete never completed");
    assert_eq!(
        env.events().destroyed(),
        1,
        "the engine outlived its last hold"
    );
    registry.destroy();
    assert_eq!(env.events().destroyed(), 1);
}

#[test]
fn bucket_delete_completes_with_a_hold_out() {
    check(hold_races_delete);
}

#[test]
fn bucket_delete_completes_with_a_hold_out_broken_destroy_ignores_holds() {
    caught(
        Mutant::DestroyIgnoresHolds,
        "engine called after destroy",
        hold_races_delete,
    );
}

#[test]
fn bucket_delete_completes_with_a_hold_out_broken_hold_counted_after_leave() {
    caught(
        Mutant::HoldCountedAfterLeave,
        "engine called after destroy",
        hold_races_delete,
    );
}

#[test]
fn bucket_delete_completes_with_a_hold_out_broken_relaxed_unhold() {
    caught(
        Mutant::UnholdRelaxed,
        "Causality violation",
        hold_races_delete,
    );
}

#[test]
fn bucket_delete_completes_with_a_hold_out_broken_unlocked_notify() {
    caught(
        Mutant::ReleaseWakesWithoutLock,
        "deadlock",
        hold_races_delete,
    );
}

/// A get's item comes back while the bucket is being deleted: its release reads the state to
/// decide whether a shutdown worker can be waiting for it (no wake-up while RUNNING), and the
/// worker reads the count of holds to decide whether to wait. Whatever the interleaving, the
/// engine is destroyed once the item is back, and the delete completes (no missed wake-up: a
/// worker left waiting is a deadlock).
fn unhold_races_delete() {
    item_back_during_delete(
        |lease| lease.into_hold(),
        |hold| {
            hold.engine().read_item();
            drop(hold);
        },
    );
}

/// A bucket's item is taken (`hold`, from a lease), then given back (`give_back`) on another
/// thread while the bucket is deleted: the delete completes and the engine is destroyed once.
fn item_back_during_delete<H: Send + 'static>(
    hold: impl FnOnce(Lease<'_, TestEnv>) -> H,
    give_back: impl FnOnce(H) + Send + 'static,
) {
    let (env, registry) = registry_with("b");
    let bucket = registry.find("b").expect("running");
    let held = hold(registry.enter(bucket.arc()).expect("running"));
    drop(bucket);
    let holder = thread::spawn(move || give_back(held));
    registry.delete("b", 7, false).expect("delete");
    holder.join().unwrap();
    registry.join_shutdowns();
    assert_eq!(env.events().notified(), [7], "the delete never completed");
    assert_eq!(env.events().destroyed(), 1, "the engine was not destroyed");
    registry.destroy();
    assert_eq!(env.events().destroyed(), 1);
}

#[test]
fn bucket_unhold_races_delete() {
    check(unhold_races_delete);
}

#[test]
fn bucket_unhold_races_delete_broken_state_read_first() {
    caught(
        Mutant::UnholdChecksStateFirst,
        "deadlock",
        unhold_races_delete,
    );
}

/// A connection's held item (a record in its `HeldItems`, as the bucket engine keeps them, the
/// bucket's handle kept by the list and the hold counted in this thread's row) is released on
/// another thread while the bucket is deleted: the release reaches the engine while the hold
/// still keeps it, the engine is destroyed once, after it, and the delete completes.
fn held_item_released_during_delete() {
    item_back_during_delete(
        |lease| {
            let mut held = HeldItems::new();
            held.add(1, lease);
            held
        },
        |mut held| {
            assert_eq!(held.release(1, TestEngine::read_item), Some(1));
            drop(held);
        },
    );
}

#[test]
fn bucket_held_item_released_during_delete() {
    check(held_item_released_during_delete);
}

#[test]
fn bucket_held_item_released_during_delete_broken_given_back_before_use() {
    caught(
        Mutant::HeldGivenBackBeforeUse,
        "Causality violation",
        held_item_released_during_delete,
    );
}

/// Global destroy races the drop of the last hold of a deleted bucket, whose worker may be
/// waiting for it: the engine is destroyed exactly once (by the worker, woken by either, or by
/// global destroy when it came before the worker began), and global destroy does not hang.
#[test]
fn bucket_global_destroy_races_the_last_hold() {
    check(|| {
        let (env, registry) = registry_with("b");
        let bucket = registry.find("b").expect("running");
        let hold = registry.enter(bucket.arc()).expect("running").into_hold();
        drop(bucket);
        registry.delete("b", 7, false).expect("delete");
        let dropper = thread::spawn(move || drop(hold));
        registry.destroy();
        dropper.join().unwrap();
        assert_eq!(env.events().destroyed(), 1);
    });
}
