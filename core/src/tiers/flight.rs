//! The per-key loader lock (the seed's resty.lock): one caller at a time runs a key's loader.
//! Its settings are [`LockOptions`] (the seed's `resty_lock_opts`).
//!
//! A key's lock is a [`Flight`] in a sharded map. Whoever inserts it holds the lock; the others
//! wait on its condition variable until the holder finishes (or their timeout passes), then try
//! again, re-reading L2 first: that re-read is what turns N concurrent misses into one load.
//! A holder older than the lock expiry (cache clock) is taken over, so a stuck loader cannot
//! block its key forever; its eventual release then leaves the newer holder's lock alone.

use super::clock::{to_ms, Clock};
use super::error::Error;
use crate::sync::time::Duration;
use crate::sync::{Arc, Condvar, Mutex};
use std::collections::HashMap;

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

const SHARDS: usize = 16;

/// One shard of lock holders, by key.
type Holders = Mutex<HashMap<Box<[u8]>, Arc<Flight>>>;

/// The loader locks of one namespace.
#[derive(Debug)]
pub(crate) struct Flights {
    shards: Box<[Holders]>,
}

#[derive(Debug)]
struct Flight {
    /// Clock time the holder took the lock (ms).
    since: u64,
    done: Mutex<bool>,
    wake: Condvar,
}

/// A held lock; dropping it releases the lock and wakes the waiters, whatever the loader did.
#[derive(Debug)]
pub(crate) struct Held<'a> {
    flights: &'a Flights,
    key: Box<[u8]>,
    flight: Arc<Flight>,
}

impl Flights {
    pub(crate) fn new() -> Self {
        Self {
            shards: (0..SHARDS).map(|_| Mutex::default()).collect(),
        }
    }

    fn shard(&self, key: &[u8]) -> &Holders {
        let mix = key
            .iter()
            .fold(key.len(), |h, &b| h.rotate_left(5) ^ usize::from(b));
        &self.shards[mix % SHARDS]
    }

    /// Takes `key`'s lock, waiting at most `opts.timeout` (on `clock`) for the current holder.
    pub(crate) fn acquire(
        &self,
        key: &[u8],
        clock: &Clock,
        opts: LockOptions,
    ) -> Result<Held<'_>, Error> {
        let start = clock.now_ms();
        let (timeout, expiry) = (to_ms(opts.timeout), to_ms(opts.expiry));
        loop {
            let now_ms = clock.now_ms();
            let flight = {
                let mut map = self.shard(key).lock();
                match map.get(key) {
                    Some(f) if now_ms.saturating_sub(f.since) < expiry => f.clone(),
                    _ => {
                        let flight = Arc::new(Flight {
                            since: now_ms,
                            done: Mutex::new(false),
                            wake: Condvar::new(),
                        });
                        map.insert(key.into(), flight.clone());
                        return Ok(Held {
                            flights: self,
                            key: key.into(),
                            flight,
                        });
                    }
                }
            };
            let mut done = flight.done.lock();
            while !*done {
                let left = timeout.saturating_sub(clock.now_ms().saturating_sub(start));
                if left == 0 {
                    return Err(Error::LockTimeout);
                }
                // A manual clock moves only by hand: look at it again every millisecond.
                let slice = if clock.is_manual() { left.min(1) } else { left };
                done = flight
                    .wake
                    .wait_timeout(done, Duration::from_millis(slice))
                    .0;
            }
        }
    }
}

impl Drop for Held<'_> {
    fn drop(&mut self) {
        {
            let mut map = self.flights.shard(&self.key).lock();
            if map
                .get(&self.key)
                .is_some_and(|f| Arc::ptr_eq(f, &self.flight))
            {
                map.remove(&self.key);
            }
        }
        // Set under the flight's mutex: a waiter checks `done` under it before sleeping, so it
        // either sees `true` or is asleep when the notification comes.
        *self.flight.done.lock() = true;
        self.flight.wake.notify_all();
    }
}
