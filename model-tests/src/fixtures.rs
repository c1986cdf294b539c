//! A test engine and environment that record what the core did to them and fail loudly on
//! anything the lifecycle forbids (a call after destroy, a second destroy, a second delete
//! notification). Built on `mcb_core::sync`, so they work inside loom models too.

use mcb_core::bucket::{Engine, Env};
use mcb_core::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use mcb_core::sync::{Arc, Condvar, Mutex, UnsafeCell};
use std::time::Duration;

/// How long [`Events::wait_for`] waits before it fails the test (a hang, not a timing).
const PATIENCE: Duration = Duration::from_secs(30);

/// Cookie type of the test engine: a connection number.
pub type Cookie = u32;

/// Config string that makes [`TestEngine::initialize`] fail.
pub const FAILING_CONFIG: &str = "fail=true";

/// Engine spec that [`TestEnv::load`] refuses.
pub const MISSING_ENGINE: &str = "missing.so";

/// What happened to all engines of one [`TestEnv`].
#[derive(Debug, Default)]
pub struct Events {
    loaded: AtomicUsize,
    destroyed: AtomicUsize,
    forced: AtomicUsize,
    dropped: AtomicUsize,
    disconnects: AtomicUsize,
    notified: Mutex<Vec<Cookie>>,
    /// Broadcast under `notified` after each delete notification, for
    /// [`Events::await_notified`]: the shim's, so a loom model can block on it.
    delete_notified: Condvar,
    /// Signalled after every event, for [`Events::wait_for`]. std's types, not the shim's: only
    /// tests on real threads wait on it, and a loom model should not explore the signal.
    signal: (std::sync::Mutex<()>, std::sync::Condvar),
}

impl Events {
    /// Engines loaded.
    pub fn loaded(&self) -> usize {
        self.loaded.load(Ordering::SeqCst)
    }

    /// Engines destroyed.
    pub fn destroyed(&self) -> usize {
        self.destroyed.load(Ordering::SeqCst)
    }

    /// Engines destroyed with `force` (a forced DELETE's).
    pub fn forced(&self) -> usize {
        self.forced.load(Ordering::SeqCst)
    }

    /// Engines dropped (their memory freed).
    pub fn dropped(&self) -> usize {
        self.dropped.load(Ordering::SeqCst)
    }

    /// ON_DISCONNECT events forwarded to engines.
    pub fn disconnects(&self) -> usize {
        self.disconnects.load(Ordering::SeqCst)
    }

    /// Cookies told that their delete completed, in order.
    pub fn notified(&self) -> Vec<Cookie> {
        self.notified.lock().clone()
    }

    /// Blocks until the delete requested by `cookie` was notified, as a connection waits for
    /// its DELETE's completion; for loom models (which report it as a deadlock if it never
    /// comes). Real-thread tests use [`Events::wait_for`], which fails a hang in time.
    pub fn await_notified(&self, cookie: Cookie) {
        let mut notified = self.notified.lock();
        while !notified.contains(&cookie) {
            notified = self.delete_notified.wait(notified);
        }
    }

    /// Blocks until `done` holds, re-checking after every event; fails the test if that takes
    /// longer than a hung thread would (`what` says what was awaited). Real threads only.
    pub fn wait_for(&self, what: &str, done: impl Fn(&Self) -> bool) {
        let (lock, signal) = &self.signal;
        let mut guard = lock
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        // Checked under the signal's lock, which every event takes after it happened and before
        // it signals: an event cannot slip between the check and the wait.
        while !done(self) {
            let (next, timeout) = signal
                .wait_timeout(guard, PATIENCE)
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            assert!(!timeout.timed_out(), "never happened: {what}");
            guard = next;
        }
    }

    /// Wakes [`Events::wait_for`] (after an event was recorded).
    fn happened(&self) {
        let (lock, signal) = &self.signal;
        let _guard = lock
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        signal.notify_all();
    }
}

/// An engine that counts calls and checks the lifecycle rules.
#[derive(Debug)]
pub struct TestEngine {
    /// Written by `initialize` with no ordering of its own, as a real engine's plain writes:
    /// only the lifecycle's publication of the bucket makes it visible to calls.
    initialized: AtomicBool,
    destroyed: AtomicBool,
    /// The memory of the items the engine handed out, which `destroy` frees as a real engine's
    /// destroy does: a plain cell (a loom cell in models), so that a model reports a use of an
    /// item that does not happen before the destroy, not only one whose flag check comes after.
    items: UnsafeCell<bool>,
    calls: AtomicUsize,
    events: Arc<Events>,
}

// SAFETY: `items` is read by item uses and written once, by `destroy`, which the lifecycle
// under test orders after every use (loom checks exactly that in the models); the rest is
// atomic.
unsafe impl Sync for TestEngine {}

impl TestEngine {
    /// One proxied call: fails the test if the engine was destroyed.
    pub fn call(&self) -> usize {
        // Relaxed: the call must see `initialize`'s write through the lifecycle alone.
        assert!(
            self.initialized.load(Ordering::Relaxed),
            "engine called before initialize"
        );
        // SeqCst: test bookkeeping; the strongest order keeps the checks simple.
        assert!(
            !self.destroyed.load(Ordering::SeqCst),
            "engine called after destroy"
        );
        self.calls.fetch_add(1, Ordering::SeqCst) + 1
    }

    /// One call that reads an item the engine handed out (`get_item_info`, `release`): a call
    /// that also reads the items' memory, which `destroy` frees.
    pub fn read_item(&self) -> usize {
        let calls = self.call();
        // SAFETY: a read; `destroy`'s write happens after every use (see the `Sync` impl).
        let live = self.items.with(|items| unsafe { *items });
        assert!(live, "item read after destroy");
        calls
    }

    /// Calls served so far.
    pub fn calls(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }
}

impl Engine for TestEngine {
    type Cookie = Cookie;

    fn initialize(&self, config: &str) -> Result<(), String> {
        if config == FAILING_CONFIG {
            return Err("test engine refuses fail=true".into());
        }
        // Relaxed: see the field.
        self.initialized.store(true, Ordering::Relaxed);
        Ok(())
    }

    fn destroy(&self, force: bool) {
        let again = self.destroyed.swap(true, Ordering::SeqCst);
        assert!(!again, "engine destroyed twice");
        // SAFETY: the one write, after every use (see the `Sync` impl).
        self.items.with_mut(|items| unsafe { *items = false });
        self.events
            .forced
            .fetch_add(usize::from(force), Ordering::SeqCst);
        self.events.destroyed.fetch_add(1, Ordering::SeqCst);
        self.events.happened();
    }

    fn disconnect(&self, _cookie: Cookie) {
        self.call();
        self.events.disconnects.fetch_add(1, Ordering::SeqCst);
    }
}

impl Drop for TestEngine {
    fn drop(&mut self) {
        self.events.dropped.fetch_add(1, Ordering::SeqCst);
        self.events.happened();
    }
}

/// Loads [`TestEngine`]s (any spec but [`MISSING_ENGINE`]) and records delete notifications.
#[derive(Debug, Default, Clone)]
pub struct TestEnv {
    events: Arc<Events>,
}

impl TestEnv {
    /// A fresh environment with its own event record.
    pub fn new() -> Self {
        Self::default()
    }

    /// What happened so far.
    pub fn events(&self) -> &Arc<Events> {
        &self.events
    }
}

impl Env for TestEnv {
    type Engine = TestEngine;

    fn load(&self, spec: &str) -> Result<TestEngine, String> {
        if spec == MISSING_ENGINE {
            return Err(format!("{spec}: no such engine"));
        }
        self.events.loaded.fetch_add(1, Ordering::SeqCst);
        Ok(TestEngine {
            initialized: AtomicBool::new(false),
            destroyed: AtomicBool::new(false),
            items: UnsafeCell::new(true),
            calls: AtomicUsize::new(0),
            events: Arc::clone(&self.events),
        })
    }

    fn notify_deleted(&self, cookie: Cookie) {
        let mut notified = self.events.notified.lock();
        assert!(!notified.contains(&cookie), "delete notified twice");
        notified.push(cookie);
        self.events.delete_notified.notify_all();
        drop(notified);
        self.events.happened();
    }
}
