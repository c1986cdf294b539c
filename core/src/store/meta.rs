//! memcached 1.6's stampede control, on stored items: an item can be stale (invalidated by
//! `md … I` or by an `ms … I` with an older CAS, and still served), and the right to recache
//! it (the "win" token) is handed to one client per stale period.
//!
//! The token rule: an item carries a `WON` bit, clear when the item is stored. A fetch that
//! wants the token (the item is stale, or its TTL fell below the client's `R` threshold, or the
//! fetch created it with `N`) sets the bit in one read-modify-write and wins if the bit was
//! clear; every other fetch, while the bit is set, is told someone else won (`Z`). Storing
//! the key again (a new item) or invalidating it again (a new stale item) starts a new period.
//! `model-tests/tests/meta.rs` checks under loom that concurrent fetches have one winner.
//!
//! The same word keeps what `mg`'s `h` and `l` report: whether the item was fetched before,
//! and when it was last accessed (the storage engine notes its `get`s and get-and-touches
//! too, through [`ItemRef::note_access`]): as memcached, the time is rewritten only once it is
//! a minute old, so a hot item's fetches do not write it.

use super::commands::{Made, Mode, Store, StoreOp};
use super::error::Error;
use super::item::{ItemRef, RelTime};
use super::seg::{key_mark, FETCHED, STALE, WON};
use super::stats::Counter;
use crate::sync::atomic::Ordering;

/// Whether a fetch was handed the recache token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Token {
    /// The fetch did not ask for it and nobody holds it.
    None,
    /// This fetch won it (`W`).
    Won,
    /// Another fetch won it earlier in this period (`Z`).
    Lost,
}

/// What a meta get asks besides the key.
#[derive(Debug, Clone, Copy, Default)]
pub struct Fetch {
    /// Create an empty item with this expiry on a miss (`N`), its creator winning the token.
    pub vivify: Option<RelTime>,
    /// Want the token when fewer than this many seconds of TTL remain (`R`).
    pub recache_below: Option<RelTime>,
    /// Set the expiry first (`T`).
    pub touch: Option<RelTime>,
    /// Leave the fetched mark and the access time alone (`u`).
    pub no_bump: bool,
    /// Only look (`me`): take and report no recache token, not even on a stale item; with
    /// `no_bump`, the fetch changes nothing.
    pub look: bool,
}

/// A meta get's hit.
#[derive(Debug)]
pub struct Fetched<'s> {
    /// The live item.
    pub item: ItemRef<'s>,
    /// It was invalidated (`X`).
    pub stale: bool,
    /// The recache token's answer (`W`, `Z`).
    pub token: Token,
    /// Whether it had been fetched before this fetch (`h`).
    pub fetched_before: bool,
    /// Seconds since its last access before this fetch (`l`).
    pub idle: RelTime,
    /// Its expiry before this fetch touched it (what a `t` ahead of the `T` reports).
    pub exptime_before: RelTime,
    /// This fetch created it (`N`).
    pub created: bool,
}

/// A meta arithmetic (`ma`): incr or decr by `delta`, creating the item on a miss with `create`
/// (its value and expiry), comparing the item's CAS with `cas` (0: any) and setting its expiry
/// to `touch` on success.
#[derive(Debug, Clone, Copy)]
pub struct Delta {
    /// Increment (else decrement, stopping at 0).
    pub incr: bool,
    /// How much.
    pub delta: u64,
    /// On a miss, create the item with this value and expiry (`N`, `J`).
    pub create: Option<(u64, RelTime)>,
    /// Apply only if the item's CAS is this (`C`; 0: any).
    pub cas: u64,
    /// Set the expiry on success (`T`).
    pub touch: Option<RelTime>,
}

/// A meta arithmetic's result: the new value, CAS and expiry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Counted {
    /// The number now stored.
    pub value: u64,
    /// Its item's CAS.
    pub cas: u64,
    /// Its item's expiry.
    pub exptime: RelTime,
    /// The expiry the item had before this call (a touch), 0 for one it created: memcached
    /// reports `t` as it stands at its place among the flags.
    pub exptime_before: RelTime,
    /// Whether the item was created (`create` on a miss): memcached 1.6 answers `ma … N q`
    /// then, though `q` hides the answer to a hit.
    pub created: bool,
}

impl Store {
    /// memcached's meta get: the live item of `key` (touched first with `fetch.touch`, created
    /// empty on a miss with `fetch.vivify`), whether it is stale, and the token's answer.
    pub fn meta_get(&self, key: &[u8], fetch: &Fetch) -> Option<Fetched<'_>> {
        let now = self.now();
        let found = match fetch.touch {
            // As memcached's, a miss is no touch miss (the host counts it as a get's).
            Some(exptime) => self.touch_item(key, exptime).inspect(|_| {
                self.counters.add(Counter::TouchHits, 1);
            }),
            None => self.get_at(key, now, false).map(|item| {
                let exptime = item.exptime();
                (item, exptime)
            }),
        };
        let (item, exptime_before) = match (found, fetch.vivify) {
            (Some(found), _) => found,
            (None, None) => return None,
            (None, Some(exptime)) => {
                let stub = self.item(key, b"", 0, exptime).ok()?;
                // Fetched already, as memcached counts the creating fetch (`h1` next time).
                return match self.store_op(&stub, StoreOp::Add, WON | FETCHED) {
                    Ok(_) => {
                        // memcached counts the creating fetch as a hit (of its touch, with one).
                        if fetch.touch.is_some() {
                            self.counters.add(Counter::TouchHits, 1);
                        }
                        Some(Fetched {
                            item: stub,
                            stale: false,
                            token: Token::Won,
                            fetched_before: false,
                            idle: 0,
                            exptime_before: 0,
                            created: true,
                        })
                    }
                    // Another client created it first: a hit on theirs.
                    Err(Error::NotStored) => self.meta_get(key, &Fetch::default()),
                    Err(_) => None,
                };
            }
        };
        let stale = item.is_stale();
        let (fetched_before, accessed) = if fetch.no_bump {
            item.access()
        } else {
            item.note_access(now)
        };
        let expiring = fetch
            .recache_below
            .is_some_and(|below| item.exptime() != 0 && item.exptime().saturating_sub(now) < below);
        let token = if fetch.look {
            Token::None
        } else if stale || expiring || item.token_taken() {
            if item.take_token() {
                Token::Won
            } else {
                Token::Lost
            }
        } else {
            Token::None
        };
        Some(Fetched {
            item,
            stale,
            token,
            fetched_before,
            idle: now.saturating_sub(accessed),
            exptime_before,
            created: false,
        })
    }

    /// incr (`increment`) or decr of `key`'s decimal value by `delta`: incr wraps at 2^64,
    /// decr stops at 0. An absent key is created with `create`'s value and expiry when given.
    /// Returns the new value and CAS.
    pub fn arithmetic(
        &self,
        key: &[u8],
        increment: bool,
        delta: u64,
        create: Option<(u64, RelTime)>,
    ) -> Result<(u64, u64), Error> {
        let delta = Delta {
            incr: increment,
            delta,
            create,
            cas: 0,
            touch: None,
        };
        self.meta_arithmetic(key, &delta)
            .map(|counted| (counted.value, counted.cas))
    }

    /// memcached's meta arithmetic: incr/decr with a CAS to compare and an expiry to set, in
    /// the same one write ([`Store::arithmetic`] is this with neither).
    pub fn meta_arithmetic(&self, key: &[u8], d: &Delta) -> Result<Counted, Error> {
        self.check(key.len(), 0)?;
        let now = self.now();
        let hash = self.engine.hash(key);
        let mut hit = false;
        let mut value = 0;
        let mut exptime_before = 0;
        let result = self.rewrite(key, hash, now, false, |current| {
            // As memcached: a number shorter than the one it replaces keeps that length,
            // padded with spaces (memcached rewrites it in place, so that the item stays the
            // one it was: fetched before, accessed when it was, stale if it was).
            let mut same_item = None;
            let (new, flags, exptime, kept) = match current {
                // An empty value is no number, whatever the CAS (memcached checks it first).
                Some(old) if old.value_len() == 0 => {
                    hit = true;
                    return Err(Error::NotNumeric);
                }
                Some(old) if d.cas != 0 && old.cas() != d.cas => return Err(Error::Exists),
                Some(old) => {
                    hit = true;
                    let v = parse_decimal(&old.value()).ok_or(Error::NotNumeric)?;
                    let new = if d.incr {
                        v.wrapping_add(d.delta)
                    } else {
                        v.saturating_sub(d.delta)
                    };
                    // Relaxed: the meta state carries over (a racing note of a read may be
                    // lost), as in touch's rewrite.
                    same_item = Some(old.item.meta().load(Ordering::Relaxed));
                    exptime_before = old.exptime();
                    (
                        new,
                        old.flags(),
                        d.touch.unwrap_or(old.exptime()),
                        old.value_len(),
                    )
                }
                None => {
                    // (A write retried after a lost race sees the key anew.)
                    hit = false;
                    exptime_before = 0;
                    let (initial, exptime) = d.create.ok_or(Error::NotFound)?;
                    (initial, 0, exptime, 0)
                }
            };
            value = new;
            let text = format!("{new:<kept$}");
            let item = self.fresh(key, text.len(), flags, exptime, Mode::Brief)?;
            item.item.write_value(0, text.as_bytes());
            let in_place = same_item.filter(|_| text.len() == kept);
            Ok(Made {
                item,
                meta: in_place.unwrap_or_else(|| Store::meta_word(now, 0)),
                linked: in_place.is_none(),
            })
        });
        // As memcached counts: a hit once done, a miss that creates nothing; not a value that
        // is no number, nor a CAS that differs, nor the creating miss (the new item counts).
        let counter = match (&result, d.incr) {
            (Ok(_), true) if hit => Some(Counter::IncrHits),
            (Ok(_), false) if hit => Some(Counter::DecrHits),
            (Err(Error::NotFound), true) => Some(Counter::IncrMisses),
            (Err(Error::NotFound), false) => Some(Counter::DecrMisses),
            _ => None,
        };
        if let Some(counter) = counter {
            self.counters.add(counter, 1);
        }
        result.map(|(cas, item)| Counted {
            value,
            cas,
            exptime: item.exptime(),
            exptime_before,
            created: !hit,
        })
    }

    /// `md … I`: replaces `key`'s live item (if its CAS is `cas`, or any with 0) by a stale
    /// copy with a new CAS (and expiry `exptime`, when given), which starts a new token period.
    /// Returns the new CAS.
    pub fn invalidate(&self, key: &[u8], cas: u64, exptime: Option<RelTime>) -> Result<u64, Error> {
        self.check(key.len(), 0)?;
        let now = self.now();
        let hash = self.engine.hash(key);
        let result = self.rewrite(key, hash, now, false, |current| {
            let old = current.ok_or(Error::NotFound)?;
            if cas != 0 && old.cas() != cas {
                return Err(Error::Exists);
            }
            let exptime = exptime.unwrap_or(old.exptime());
            let copy = self.fresh(key, old.value_len(), old.flags(), exptime, Mode::Brief)?;
            copy.item.copy_value(0, &old.item, 0, old.value_len());
            // memcached marks the item stale in place: its fetched mark, access time and
            // base64 mark stay; the token is free again.
            // Relaxed: the meta state carries over (a racing note of a read may be lost).
            let meta = old.item.meta().load(Ordering::Relaxed);
            Ok(Made {
                item: copy,
                meta: meta & !WON | STALE,
                linked: false,
            })
        });
        // As memcached's: a refused invalidation is a delete miss, a done one no delete hit.
        if matches!(result, Err(Error::NotFound | Error::Exists)) {
            self.counters.add(Counter::DeleteMisses, 1);
        }
        result.map(|(cas, _)| cas)
    }

    /// `ms … I C<cas>`: stores `item` if `cas` is the present item's CAS, and also, marked
    /// stale, if `cas` is older (a late writer's data, served until recached). Returns the new
    /// CAS. `key_binary`: as in [`Store::store_marked`].
    pub fn store_invalid(
        &self,
        item: &ItemRef<'_>,
        cas: u64,
        key_binary: bool,
    ) -> Result<u64, Error> {
        let key_bits = key_mark(key_binary);
        self.check(item.key_len(), item.value_len())?;
        let now = self.now();
        let key = item.key();
        let hash = self.engine.hash(&key);
        let result = self.store_whole(item, &key, hash, now, |found| match found.live() {
            Some(old) => {
                let current = self.engine.cas_of(old);
                match cas.cmp(&current) {
                    std::cmp::Ordering::Less => Ok(Store::meta_word(now, STALE | key_bits)),
                    std::cmp::Ordering::Equal => Ok(Store::meta_word(now, key_bits)),
                    std::cmp::Ordering::Greater => Err(Error::Exists),
                }
            }
            None => Err(Error::NotFound),
        });
        // Counted as a CAS store, as memcached counts it (a stale one as a hit).
        self.count_cas(&result);
        result
    }
}

/// A stored value as memcached's incr and decr read it (C's `strtoull`, as its
/// `safe_strtoull` takes it): leading whitespace, a sign, at least one digit, then whitespace
/// or the end (what follows is not looked at: `5 abc` is 5); within 64 bits, and a minus sign
/// only where the number wraps to one not negative as a signed number (`-0`). The host reads
/// its commands' tokens by the same rule (`text::c_u64` in `ffi/host`, which does not depend
/// on this crate).
fn parse_decimal(value: &[u8]) -> Option<u64> {
    let space = |c: &u8| matches!(c, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r');
    let rest = &value[value.iter().position(|c| !space(c))?..];
    let (negative, rest) = match rest.split_first() {
        Some((b'-', rest)) => (true, rest),
        Some((b'+', rest)) => (false, rest),
        _ => (false, rest),
    };
    let digits = rest.iter().take_while(|c| c.is_ascii_digit()).count();
    if digits == 0 || rest.get(digits).is_some_and(|c| !space(c)) {
        return None;
    }
    let magnitude: u64 = std::str::from_utf8(&rest[..digits]).ok()?.parse().ok()?;
    let number = if negative {
        magnitude.wrapping_neg()
    } else {
        magnitude
    };
    (!negative || i64::try_from(number).is_ok()).then_some(number)
}

#[cfg(all(test, not(mcb_loom)))]
mod tests {
    use super::*;
    use crate::store::clock::ManualClock;
    use crate::store::config::Config;

    #[test]
    fn decimals_as_incr_reads_them() {
        assert_eq!(parse_decimal(b"42"), Some(42));
        assert_eq!(parse_decimal(b" 7\r\n"), Some(7));
        assert_eq!(parse_decimal(b"18446744073709551615"), Some(u64::MAX));
        assert_eq!(parse_decimal(b"18446744073709551616"), None);
        assert_eq!(parse_decimal(b""), None);
        assert_eq!(parse_decimal(b"-1"), None);
        assert_eq!(parse_decimal(b"1x"), None);
        assert_eq!(parse_decimal(b"+5"), Some(5));
        assert_eq!(parse_decimal(b"-0"), Some(0));
        assert_eq!(parse_decimal(b"5 abc"), Some(5));
        assert_eq!(parse_decimal(b"\x0b1 2"), Some(1));
        assert_eq!(parse_decimal(b"-18446744073709551615"), Some(1));
        assert_eq!(parse_decimal(b" "), None);
        assert_eq!(parse_decimal(b"+"), None);
        assert_eq!(parse_decimal(b"- 5"), None);
    }

    fn store() -> (Store, ManualClock) {
        let clock = ManualClock::new(1000);
        let store = Store::new(Config::default(), Box::new(clock.clone())).unwrap();
        (store, clock)
    }

    fn set(store: &Store, key: &[u8], value: &[u8], exptime: RelTime) -> u64 {
        let item = store.item(key, value, 0, exptime).unwrap();
        store.store(&item, StoreOp::Set).unwrap()
    }

    #[test]
    fn vivify_wins_once_then_others_lose() {
        let (store, _) = store();
        let vivify = Fetch {
            vivify: Some(1030),
            ..Fetch::default()
        };
        let first = store.meta_get(b"k", &vivify).unwrap();
        assert_eq!(
            (first.token, first.item.value()),
            (Token::Won, b"".to_vec())
        );
        let second = store.meta_get(b"k", &vivify).unwrap();
        assert_eq!(second.token, Token::Lost);
        assert_eq!(
            store.meta_get(b"k", &Fetch::default()).unwrap().token,
            Token::Lost
        );
        // The winner's store starts a new period.
        set(&store, b"k", b"v", 0);
        assert_eq!(store.meta_get(b"k", &vivify).unwrap().token, Token::None);
    }

    #[test]
    fn fetched_before_and_idle_time() {
        let (store, clock) = store();
        set(&store, b"k", b"v", 0);
        clock.advance(5);
        let first = store.meta_get(b"k", &Fetch::default()).unwrap();
        assert_eq!((first.fetched_before, first.idle), (false, 5));
        clock.advance(3);
        let quiet = Fetch {
            no_bump: true,
            ..Fetch::default()
        };
        // As memcached: the access time moves only once it is a minute old.
        let peek = store.meta_get(b"k", &quiet).unwrap();
        assert_eq!((peek.fetched_before, peek.idle), (true, 8));
        clock.advance(60);
        assert_eq!(store.meta_get(b"k", &quiet).unwrap().idle, 68);
        let item = store.get(b"k").unwrap();
        assert_eq!(item.note_access(store.now()), (true, 1000));
        assert_eq!(store.meta_get(b"k", &quiet).unwrap().idle, 0);
    }

    #[test]
    fn arithmetic_with_cas_and_ttl() {
        let (store, _) = store();
        let cas = set(&store, b"n", b"10", 0);
        let d = |cas, touch| Delta {
            incr: true,
            delta: 1,
            create: None,
            cas,
            touch,
        };
        assert_eq!(
            store.meta_arithmetic(b"n", &d(cas + 1, None)),
            Err(Error::Exists)
        );
        let done = store.meta_arithmetic(b"n", &d(cas, Some(1100))).unwrap();
        assert_eq!((done.value, done.exptime), (11, 1100));
        assert!(done.cas > cas);
        assert!(!done.created, "a hit creates nothing");
        assert_eq!(
            store.meta_arithmetic(b"n", &d(0, None)).unwrap().exptime,
            1100
        );
        let create = Delta {
            create: Some((7, 1050)),
            ..d(5, None)
        };
        let made = store.meta_arithmetic(b"m", &create).unwrap();
        assert_eq!((made.value, made.exptime, made.created), (7, 1050, true));
        assert_eq!(
            store.meta_arithmetic(b"x", &d(0, None)),
            Err(Error::NotFound)
        );
    }

    #[test]
    fn a_look_changes_nothing_and_an_invalidation_keeps_the_access_state() {
        let (store, _) = store();
        set(&store, b"k", b"v", 0);
        let look = Fetch {
            no_bump: true,
            look: true,
            ..Fetch::default()
        };
        let seen = store.meta_get(b"k", &look).unwrap();
        assert!(!seen.fetched_before);
        store.meta_get(b"k", &Fetch::default()).unwrap();
        let cas = store.get(b"k").unwrap().cas();
        store.invalidate(b"k", cas, None).unwrap();
        // Stale now: a look neither takes the token nor reports it; the next fetch wins it.
        let seen = store.meta_get(b"k", &look).unwrap();
        assert_eq!((seen.stale, seen.token), (true, Token::None));
        assert!(
            seen.fetched_before,
            "the invalidation kept the fetched mark"
        );
        let fetched = store.meta_get(b"k", &Fetch::default()).unwrap();
        assert_eq!(fetched.token, Token::Won);
        drop(fetched);
        // A new invalidation starts a new token period.
        store.invalidate(b"k", 0, None).unwrap();
        let fetched = store.meta_get(b"k", &Fetch::default()).unwrap();
        assert_eq!(fetched.token, Token::Won, "the token is free again");
    }

    #[test]
    fn recache_below_a_ttl() {
        let (store, clock) = store();
        set(&store, b"k", b"v", 1100);
        let recache = Fetch {
            recache_below: Some(30),
            ..Fetch::default()
        };
        assert_eq!(store.meta_get(b"k", &recache).unwrap().token, Token::None);
        clock.advance(80);
        assert_eq!(store.meta_get(b"k", &recache).unwrap().token, Token::Won);
        assert_eq!(store.meta_get(b"k", &recache).unwrap().token, Token::Lost);
    }

    #[test]
    fn invalidated_items_are_served_stale_with_one_winner() {
        let (store, _) = store();
        let cas = set(&store, b"k", b"v", 0);
        assert_eq!(store.invalidate(b"k", cas + 1, None), Err(Error::Exists));
        let new_cas = store.invalidate(b"k", cas, Some(1030)).unwrap();
        assert!(new_cas > cas);
        let fetched = store.meta_get(b"k", &Fetch::default()).unwrap();
        assert!(fetched.stale);
        assert_eq!(
            (fetched.token, fetched.item.value()),
            (Token::Won, b"v".to_vec())
        );
        assert_eq!(fetched.item.exptime(), 1030);
        assert_eq!(
            store.meta_get(b"k", &Fetch::default()).unwrap().token,
            Token::Lost
        );
        assert_eq!(store.invalidate(b"nope", 0, None), Err(Error::NotFound));
    }

    #[test]
    fn a_key_sent_in_base64_stays_marked_where_memcached_keeps_the_item() {
        let (store, clock) = store();
        let marked = |key: &[u8]| store.get(key).map(|item| item.key_binary());
        let item = store.item(b"n", b"5", 0, 0).unwrap();
        store.store_marked(&item, StoreOp::Set, true).unwrap();
        assert_eq!(marked(b"n"), Some(true));
        // Changed in place by memcached: a read, a touch, a fitting incr, an invalidation.
        store.fetch(b"n").unwrap();
        clock.advance(120);
        store.fetch(b"n").unwrap();
        store.touch(b"n", 5000).unwrap();
        store.arithmetic(b"n", true, 1, None).unwrap();
        let cas = store.get(b"n").unwrap().cas();
        store.invalidate(b"n", cas, None).unwrap();
        assert_eq!(marked(b"n"), Some(true), "kept in place");
        // Made anew: an incr that outgrows the value, an append, a plain set.
        store.arithmetic(b"n", true, 1000, None).unwrap();
        assert_eq!(marked(b"n"), Some(false), "an incr that outgrew it");
        for (op, value) in [(StoreOp::Set, &b"v"[..]), (StoreOp::Append, b"w")] {
            let item = store.item(b"k", value, 0, 0).unwrap();
            store.store_marked(&item, op, op == StoreOp::Set).unwrap();
        }
        assert_eq!(marked(b"k"), Some(false), "an append");
        set(&store, b"n", b"v", 0);
        assert_eq!(marked(b"n"), Some(false), "a plain set");
        // A late writer's stale store, marked or not.
        for key_binary in [true, false] {
            let cas = store.get(b"n").unwrap().cas();
            let late = store.item(b"n", b"late", 0, 0).unwrap();
            store.store_invalid(&late, cas - 1, key_binary).unwrap();
            assert_eq!(marked(b"n"), Some(key_binary));
        }
    }

    #[test]
    fn an_older_cas_stores_stale() {
        let (store, _) = store();
        let cas = set(&store, b"k", b"v", 0);
        let late = store.item(b"k", b"late", 0, 0).unwrap();
        assert_eq!(
            store.store_invalid(&late, cas + 1, false),
            Err(Error::Exists)
        );
        let late = store.item(b"k", b"late", 0, 0).unwrap();
        store.store_invalid(&late, cas - 1, false).unwrap();
        let fetched = store.meta_get(b"k", &Fetch::default()).unwrap();
        assert!(fetched.stale && fetched.item.value() == b"late");
        let cas = fetched.item.cas();
        let fresh = store.item(b"k", b"fresh", 0, 0).unwrap();
        store.store_invalid(&fresh, cas, false).unwrap();
        assert!(!store.meta_get(b"k", &Fetch::default()).unwrap().stale);
    }
}
