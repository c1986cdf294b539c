//! The per-key loader lock (the seed's resty.lock): one caller at a time runs a key's loader.
//! Its settings are [`LockOptions`] (the seed's `resty_lock_opts`).
//!
//! A key's lock is a [`Flight`] in a sharded list. Whoever inserts it holds the lock; the others
//! wait on its condition variable until the holder finishes (or their timeout passes), then try
//! again, re-reading L2 first: that re-read is what turns N concurrent misses into one load.
//! The holder wakes them only when one waits, so an uncontended load makes no system call.
//! A holder older than the lock expiry (cache clock) is taken over, so a stuck loader cannot
//! block its key forever; its eventual release then leaves the newer holder's lock alone.

use super::clock::{to_ms, Clock};
use super::error::Error;
use crate::sync::mutant::{self, Mutant};
use crate::sync::time::Duration;
use crate::sync::{Arc, Condvar, Mutex};

/// The per-key loader lock (the seed's `resty_lock_opts`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LockOptions {
    /// How long (cache clock) a caller waits for another caller's loader before giving up.
    pub timeout: Duration,
    /// How long (cache clock) a lock holds before the next caller may take it over, so that a
    /// stuck loader cannot block a key forever.
    pub expiry: Duration,
}

impl Default for LockOptions {
    /// resty.lock's defaults: wait 5 s, expire after 30 s.
    fn default() -> Self {
        Self {
            timeout: Duration::from_secs(5),
            expiry: Duration::from_secs(30),
        }
    }
}

/// Shards of the holders' table, picked by the key's hash.
const SHARDS: usize = 16;

/// One shard of lock holders: a list, scanned by hash then key. It holds only the loads in
/// flight (a few per thread at most), and a scan of it is cheaper than a map's hashing.
type Holders = Mutex<Vec<Arc<Flight>>>;

/// The loader locks of one namespace.
#[derive(Debug)]
pub(crate) struct Flights {
    shards: Box<[Holders]>,
}

/// One key's lock while a holder has it.
#[derive(Debug)]
struct Flight {
    /// The key's hash, compared before the key.
    hash: u64,
    key: Box<[u8]>,
    /// Clock time the holder took the lock (ms).
    since: u64,
    state: Mutex<Waiting>,
    wake: Condvar,
}

/// What a flight's waiters and its holder share.
#[derive(Debug, Default)]
struct Waiting {
    /// The holder let go.
    done: bool,
    /// Callers asleep on `wake` (or about to be): the holder wakes them only if there are
    /// any, so that a load nobody waits for makes no system call (std's `notify_all` makes
    /// one whether or not a thread waits: one per miss, before).
    sleepers: usize,
}

/// A held lock; dropping it releases the lock and wakes the waiters, whatever the loader did.
#[derive(Debug)]
pub(crate) struct Held<'a> {
    holders: &'a Holders,
    flight: Arc<Flight>,
}

impl Flights {
    pub(crate) fn new() -> Self {
        Self {
            shards: (0..SHARDS).map(|_| Mutex::default()).collect(),
        }
    }

    /// Takes `key`'s lock (`hash` its hash), waiting at most `opts.timeout` (on `clock`) for
    /// the current holder.
    pub(crate) fn acquire(
        &self,
        key: &[u8],
        hash: u64,
        clock: &Clock,
        opts: LockOptions,
    ) -> Result<Held<'_>, Error> {
        let holders = &self.shards[hash as usize % SHARDS];
        let start = clock.now_ms();
        let (timeout, expiry) = (to_ms(opts.timeout), to_ms(opts.expiry));
        loop {
            let now_ms = clock.now_ms();
            let flight = {
                let mut list = holders.lock();
                let at = list.iter().position(|f| f.hash == hash && *f.key == *key);
                match at {
                    Some(at) if now_ms.saturating_sub(list[at].since) < expiry => list[at].clone(),
                    _ => {
                        let flight = Arc::new(Flight {
                            hash,
                            key: key.into(),
                            since: now_ms,
                            state: Mutex::default(),
                            wake: Condvar::new(),
                        });
                        // An expired holder's entry gives way; its release finds it gone.
                        match at {
                            Some(at) => list[at] = flight.clone(),
                            None => list.push(flight.clone()),
                        }
                        return Ok(Held { holders, flight });
                    }
                }
            };
            let mut state = flight.state.lock();
            if !state.done {
                state.sleepers += 1;
                while !state.done {
                    let left = timeout.saturating_sub(clock.now_ms().saturating_sub(start));
                    if left == 0 {
                        state.sleepers -= 1;
                        return Err(Error::LockTimeout);
                    }
                    // A manual clock moves only by hand: look at it again every millisecond.
                    let slice = if clock.is_manual() { left.min(1) } else { left };
                    state = flight
                        .wake
                        .wait_timeout(state, Duration::from_millis(slice))
                        .0;
                }
                state.sleepers -= 1;
            }
        }
    }
}

impl Drop for Held<'_> {
    fn drop(&mut self) {
        {
            let mut list = self.holders.lock();
            if let Some(at) = list.iter().position(|f| Arc::ptr_eq(f, &self.flight)) {
                list.swap_remove(at);
            }
        }
        // Both under the flight's mutex: a waiter checks `done` and counts itself a sleeper
        // under it before sleeping, so it either sees `true` or is counted (and asleep, or
        // about to be, when the notification comes).
        let early = mutant::active(Mutant::FlightCountsSleepersFirst)
            .then(|| self.flight.state.lock().sleepers);
        let mut state = self.flight.state.lock();
        state.done = true;
        if early.unwrap_or(state.sleepers) > 0 {
            drop(state);
            self.flight.wake.notify_all();
        }
    }
}
