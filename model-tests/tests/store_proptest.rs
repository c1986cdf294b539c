//! Random sequences of every store operation (set, add, replace, append, prepend, CAS, get,
//! remove with and without CAS, touch, incr/decr, flush now and delayed, scrub, time steps) on
//! a store small enough to evict (three 1 KiB segments; large objects too, with a larger
//! `item_size_max`), checked against a sequential model of memcached's rules on a
//! manual clock.
//!
//! Eviction is the one liberty the store has: once the store counts an eviction (the
//! `evictions` statistic grows), every key the model holds may be gone; a get then either finds
//! nothing (and the model forgets the key) or finds exactly what the model holds. A key not
//! touched by an eviction since it was written must be found exactly. CAS values must be unique
//! and grow, per key, and a CAS store with the present CAS must succeed.

#![cfg(not(mcb_loom))]

use mcb_core::store::{Config, Error, ManualClock, Store, StoreOp};
use proptest::prelude::*;
use std::collections::{HashMap, HashSet};

const KEYS: usize = 12;

#[derive(Clone, Debug)]
enum Op {
    Store {
        op: u8,
        key: usize,
        len: usize,
        flags: u32,
        ttl: u32,
    },
    Cas {
        key: usize,
        stale: bool,
        len: usize,
    },
    Get {
        key: usize,
    },
    Remove {
        key: usize,
        cas: u8,
    },
    Touch {
        key: usize,
        ttl: u32,
    },
    Number {
        key: usize,
        n: u64,
    },
    Arith {
        key: usize,
        incr: bool,
        delta: u64,
        create: bool,
    },
    Flush {
        later: u32,
    },
    Scrub,
    Advance {
        secs: u32,
    },
}

fn op(max_len: usize) -> impl Strategy<Value = Op> {
    let key = 0..KEYS;
    let len = prop_oneof![8 => 0..120usize, 2 => 0..max_len];
    let ttl = prop_oneof![3 => Just(0u32), 1 => 1..5u32];
    prop_oneof![
        8 => (0..5u8, key.clone(), len.clone(), prop_oneof![Just(0u32), Just(7)], ttl.clone())
            .prop_map(|(op, key, len, flags, ttl)| Op::Store { op, key, len, flags, ttl }),
        2 => (key.clone(), any::<bool>(), len).prop_map(|(key, stale, len)| Op::Cas { key, stale, len }),
        8 => key.clone().prop_map(|key| Op::Get { key }),
        2 => (key.clone(), 0..3u8).prop_map(|(key, cas)| Op::Remove { key, cas }),
        1 => (key.clone(), ttl).prop_map(|(key, ttl)| Op::Touch { key, ttl }),
        1 => (key.clone(), 0..100u64).prop_map(|(key, n)| Op::Number { key, n }),
        2 => (key, any::<bool>(), 0..20u64, any::<bool>())
            .prop_map(|(key, incr, delta, create)| Op::Arith { key, incr, delta, create }),
        1 => prop_oneof![Just(0u32), 1..4u32].prop_map(|later| Op::Flush { later }),
        1 => Just(Op::Scrub),
        2 => (0..4u32).prop_map(|secs| Op::Advance { secs }),
    ]
}

/// What the model holds for a key.
#[derive(Clone, PartialEq)]
struct Held {
    value: Vec<u8>,
    flags: u32,
    exptime: u32,
    cas: u64,
}

impl std::fmt::Debug for Held {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let head = &self.value[..self.value.len().min(4)];
        write!(
            f,
            "{} bytes {head:?}.. flags {} exptime {} cas {}",
            self.value.len(),
            self.flags,
            self.exptime,
            self.cas
        )
    }
}

struct Model {
    store: Store,
    clock: ManualClock,
    keys: HashMap<usize, Held>,
    /// Keys an eviction may have taken since they were written.
    shaken: HashSet<usize>,
    evictions: u64,
    /// The last CAS each key had (they only grow, with `use_cas`).
    last_cas: HashMap<usize, u64>,
    version: u8,
    /// A delayed flush: its time.
    flush_at: Option<u32>,
    use_cas: bool,
}

fn key(k: usize) -> Vec<u8> {
    format!("key:{k}").into_bytes()
}

impl Model {
    fn new(config: Config) -> Self {
        let use_cas = config.use_cas;
        let clock = ManualClock::new(100);
        let store = Store::new(config, Box::new(clock.clone())).expect("valid");
        Self {
            store,
            clock,
            keys: HashMap::new(),
            shaken: HashSet::new(),
            evictions: 0,
            last_cas: HashMap::new(),
            version: 0,
            flush_at: None,
            use_cas,
        }
    }

    fn now(&self) -> u32 {
        self.store.now()
    }

    fn value(&mut self, len: usize) -> Vec<u8> {
        self.version = self.version.wrapping_add(1);
        (0..len)
            .map(|i| self.version.wrapping_add(i as u8))
            .collect()
    }

    /// The model's live item of `k`, applying expiry.
    fn live(&mut self, k: usize) -> Option<Held> {
        let now = self.now();
        match self.keys.get(&k) {
            Some(h) if h.exptime == 0 || h.exptime > now => Some(h.clone()),
            Some(_) => {
                self.keys.remove(&k);
                None
            }
            None => None,
        }
    }

    /// A key that may be gone: an eviction came since it was written (or during this step).
    fn may_be_gone(&self, k: usize) -> bool {
        self.shaken.contains(&k) || self.store.stats().evictions != self.evictions
    }

    fn wrote(&mut self, k: usize, held: Held) {
        if self.use_cas {
            let last = self.last_cas.insert(k, held.cas).unwrap_or(0);
            assert!(
                held.cas > last,
                "CAS of {k} went from {last} to {}",
                held.cas
            );
        } else {
            assert_eq!(held.cas, 0, "a CAS without use_cas");
        }
        self.shaken.remove(&k);
        self.keys.insert(k, held);
    }

    /// Takes what the store holds for `k` as the model's (after a step whose outcome the model
    /// cannot tell apart).
    fn learn(&mut self, k: usize) {
        let held = self.store.get(&key(k)).map(|i| Held {
            value: i.value(),
            flags: i.flags(),
            exptime: i.exptime(),
            cas: i.cas(),
        });
        self.shaken.remove(&k);
        match held {
            Some(held) => {
                self.last_cas.insert(k, held.cas);
                self.keys.insert(k, held);
            }
            None => {
                self.keys.remove(&k);
            }
        }
    }

    /// Notes the evictions since the last step: every key held may be gone.
    fn note_evictions(&mut self) {
        let now = self.store.stats().evictions;
        if now != self.evictions {
            self.evictions = now;
            self.shaken.extend(self.keys.keys().copied());
        }
    }

    /// The store's answer for `k` against the model's, reconciling an evicted key.
    fn check_get(&mut self, k: usize) {
        let want = self.live(k);
        let got = self.store.get(&key(k)).map(|i| Held {
            value: i.value(),
            flags: i.flags(),
            exptime: i.exptime(),
            cas: i.cas(),
        });
        match (want, got) {
            (Some(_), None) if self.may_be_gone(k) => {
                self.keys.remove(&k);
            }
            (want, got) => assert_eq!(got, want, "get {k}"),
        }
    }

    fn step(&mut self, op: &Op) {
        match *op {
            Op::Store {
                op,
                key: k,
                len,
                flags,
                ttl,
            } => {
                let op = [
                    StoreOp::Set,
                    StoreOp::Add,
                    StoreOp::Replace,
                    StoreOp::Append,
                    StoreOp::Prepend,
                ][op as usize];
                let exptime = if ttl == 0 { 0 } else { self.now() + ttl };
                let value = self.value(len);
                // The model's answer first; an evicted key may make add succeed and
                // replace/append/prepend fail where the model says otherwise.
                let live = self.live(k);
                let result = match self.store.item(&key(k), &value, flags, exptime) {
                    Ok(item) => self.store.store(&item, op),
                    Err(e) => return assert_eq!(e, Error::TooBig, "item of {len}"),
                };
                let (expect_ok, joined) = match (op, &live) {
                    (StoreOp::Set, _) => (true, None),
                    (StoreOp::Add, l) => (l.is_none(), None),
                    (StoreOp::Replace, l) => (l.is_some(), None),
                    (StoreOp::Append, Some(h)) => {
                        (true, Some([h.value.clone(), value.clone()].concat()))
                    }
                    (StoreOp::Prepend, Some(h)) => {
                        (true, Some([value.clone(), h.value.clone()].concat()))
                    }
                    _ => (false, None),
                };
                let gone = self.may_be_gone(k);
                match result {
                    Ok(cas) => {
                        assert!(expect_ok || gone, "{op:?} {k} stored against {live:?}");
                        let (value, flags, exptime) = match (&joined, &live) {
                            (Some(v), Some(h)) if expect_ok => (v.clone(), h.flags, h.exptime),
                            _ => (value, flags, exptime),
                        };
                        self.wrote(
                            k,
                            Held {
                                value,
                                flags,
                                exptime,
                                cas,
                            },
                        );
                    }
                    Err(Error::TooBig) => assert!(joined.is_some(), "{op:?} too big"),
                    Err(Error::NoMemory) => {}
                    Err(e) => {
                        assert!(
                            !expect_ok || gone,
                            "{op:?} {k} failed ({e:?}) against {live:?}"
                        );
                        if expect_ok && gone {
                            self.keys.remove(&k);
                        }
                    }
                }
            }
            Op::Cas { key: k, stale, len } => {
                let live = self.live(k);
                let value = self.value(len);
                let expected = live.as_ref().map_or(1, |h| h.cas + u64::from(stale));
                let result = match self.store.item(&key(k), &value, 0, 0) {
                    Ok(item) => {
                        item.set_cas(expected);
                        self.store.store(&item, StoreOp::Cas)
                    }
                    Err(_) => return,
                };
                match (result, &live) {
                    (Ok(cas), Some(_)) => {
                        assert!(!stale, "a stale CAS stored");
                        self.wrote(
                            k,
                            Held {
                                value,
                                flags: 0,
                                exptime: 0,
                                cas,
                            },
                        );
                    }
                    (Ok(_), None) => panic!("CAS stored on an absent key"),
                    (Err(Error::Exists), Some(_)) => assert!(stale, "the present CAS refused"),
                    (Err(Error::NotFound), _) if live.is_none() || self.may_be_gone(k) => {
                        self.keys.remove(&k);
                    }
                    (Err(Error::NoMemory), _) => {}
                    (r, l) => panic!("CAS {k}: {r:?} against {l:?}"),
                }
            }
            Op::Get { key: k } => self.check_get(k),
            Op::Remove { key: k, cas } => {
                let live = self.live(k);
                let given = match (cas, &live) {
                    (0, _) => 0,
                    (1, Some(h)) => h.cas,
                    _ => u64::MAX,
                };
                match (self.store.remove(&key(k), given), &live) {
                    (Ok(()), Some(_)) => {
                        self.keys.remove(&k);
                    }
                    (Err(Error::Exists), Some(_)) => assert_eq!(given, u64::MAX),
                    (Err(Error::NotFound), l) => {
                        assert!(l.is_none() || self.may_be_gone(k), "remove {k}: not found");
                        self.keys.remove(&k);
                    }
                    (r, l) => panic!("remove {k}: {r:?} against {l:?}"),
                }
            }
            Op::Touch { key: k, ttl } => {
                let exptime = if ttl == 0 { 0 } else { self.now() + ttl };
                let live = self.live(k);
                match (self.store.touch(&key(k), exptime).is_some(), live) {
                    (true, Some(mut h)) => {
                        h.exptime = exptime;
                        self.keys.insert(k, h);
                    }
                    (false, Some(_)) if self.may_be_gone(k) => {
                        self.keys.remove(&k);
                    }
                    (false, None) => {}
                    (hit, l) => panic!("touch {k}: {hit} against {l:?}"),
                }
            }
            Op::Number { key: k, n } => {
                let item = self.store.item(&key(k), n.to_string().as_bytes(), 0, 0);
                let stored = item.map(|item| self.store.store(&item, StoreOp::Set));
                if let Ok(Ok(cas)) = stored {
                    self.wrote(
                        k,
                        Held {
                            value: n.to_string().into_bytes(),
                            flags: 0,
                            exptime: 0,
                            cas,
                        },
                    );
                }
            }
            Op::Arith {
                key: k,
                incr,
                delta,
                create,
            } => {
                let live = self.live(k);
                let create = create.then_some((5, 0));
                let result = self.store.arithmetic(&key(k), incr, delta, create);
                let number = live.as_ref().map(|h| strtoull(&h.value));
                let want = number.flatten().map(|n| {
                    if incr {
                        n.wrapping_add(delta)
                    } else {
                        n.saturating_sub(delta)
                    }
                });
                let gone = self.may_be_gone(k);
                match (result, &live, number) {
                    // An eviction (before or during this step) may have taken the key before
                    // the arithmetic read it (then it created it anew): either answer, and the
                    // model no longer knows which.
                    (Ok((v, _)), _, _) if gone => {
                        assert!(
                            Some(v) == want || Some(v) == create.map(|c| c.0),
                            "arith {k}: {v}"
                        );
                        self.learn(k);
                    }
                    (Ok((v, cas)), Some(h), Some(Some(_))) => {
                        assert_eq!(Some(v), want, "arith {k}");
                        let text = format!("{v:<width$}", width = h.value.len());
                        self.wrote(
                            k,
                            Held {
                                value: text.into_bytes(),
                                flags: h.flags,
                                exptime: h.exptime,
                                cas,
                            },
                        );
                    }
                    (Ok((v, cas)), l, _) if l.is_none() || self.may_be_gone(k) => {
                        assert_eq!(Some(v), create.map(|c| c.0), "arith {k} created");
                        self.wrote(
                            k,
                            Held {
                                value: v.to_string().into_bytes(),
                                flags: 0,
                                exptime: 0,
                                cas,
                            },
                        );
                    }
                    (Err(Error::NotNumeric), Some(_), Some(None)) => {}
                    (Err(Error::NotFound), l, _)
                        if create.is_none() && (l.is_none() || self.may_be_gone(k)) =>
                    {
                        self.keys.remove(&k);
                    }
                    (Err(Error::NoMemory), _, _) => {}
                    (r, l, _) => panic!("arith {k}: {r:?} against {l:?}"),
                }
            }
            Op::Flush { later } => {
                if later == 0 {
                    self.store.flush(0);
                    self.keys.clear();
                    self.flush_at = None;
                } else {
                    self.store.flush(self.now() + later);
                    self.flush_at = Some(self.now() + later);
                }
            }
            Op::Scrub => {
                self.store.scrub();
            }
            Op::Advance { secs } => {
                self.clock.advance(secs);
                // A delayed flush takes what was stored before its time (the store carries it
                // out at its first operation from then on).
                if self.flush_at.is_some_and(|at| at <= self.now()) {
                    self.flush_at = None;
                    self.keys.clear();
                }
            }
        }
        self.note_evictions();
        let stats = self.store.stats();
        assert!(stats.bytes <= 6 << 10, "{stats:?}");
    }

    /// Every key, at the end.
    fn check_all(&mut self) {
        for k in 0..KEYS {
            self.check_get(k);
        }
    }
}

fn run(config: Config, ops: &[Op]) {
    let mut model = Model::new(config);
    for op in ops {
        model.step(op);
    }
    model.check_all();
}

fn small() -> Config {
    Config {
        cache_size: 4 << 10,
        item_size_max: 1024,
        segment_size: 1024,
        lanes: 1,
        ..Config::default()
    }
}

/// Items up to 4 KiB: those over a segment are large objects.
fn large() -> Config {
    Config {
        item_size_max: 4096,
        cache_size: 6 << 10,
        ..small()
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn the_store_follows_the_model(ops in proptest::collection::vec(op(600), 1..200)) {
        run(small(), &ops);
    }

    #[test]
    fn the_store_follows_the_model_with_large_objects(ops in proptest::collection::vec(op(3000), 1..200)) {
        run(large(), &ops);
    }

    #[test]
    fn the_store_follows_the_model_without_cas(ops in proptest::collection::vec(op(600), 1..200)) {
        run(Config { use_cas: false, ..small() }, &ops);
    }
}

/// The configurations above do evict (so that the model's eviction rule is exercised).
#[test]
fn the_small_stores_evict() {
    for config in [small(), large()] {
        let mut model = Model::new(config);
        for i in 0..200 {
            model.step(&Op::Store {
                op: 0,
                key: i % KEYS,
                len: 100 + i % 300,
                flags: 0,
                ttl: 0,
            });
            model.step(&Op::Get {
                key: (i * 7) % KEYS,
            });
        }
        model.check_all();
        assert!(
            model.evictions > 0,
            "no eviction: {:?}",
            model.store.stats()
        );
    }
}

/// A stored number as memcached's incr reads it with C's `strtoull`: C whitespace (`isspace`:
/// vertical tab too), a sign, the digits, then whitespace or the end; a minus sign negates
/// modulo 2^64, and a result negative as a signed number is refused.
fn strtoull(value: &[u8]) -> Option<u64> {
    let space = |c: u8| b" \t\n\x0b\x0c\r".contains(&c);
    let mut rest = value;
    while let [c, tail @ ..] = rest {
        if !space(*c) {
            break;
        }
        rest = tail;
    }
    let negative = rest.first() == Some(&b'-');
    if matches!(rest.first(), Some(b'-' | b'+')) {
        rest = &rest[1..];
    }
    let end = rest
        .iter()
        .position(|c| !c.is_ascii_digit())
        .unwrap_or(rest.len());
    if end == 0 || rest.get(end).is_some_and(|&c| !space(c)) {
        return None;
    }
    let n: u64 = std::str::from_utf8(&rest[..end]).ok()?.parse().ok()?;
    let n = if negative { 0u64.wrapping_sub(n) } else { n };
    (!negative || (n as i64) >= 0).then_some(n)
}
