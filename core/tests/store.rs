//! memcached's item semantics, one test per rule, on a manual clock.

use mcb_core::store::*;
use std::sync::Arc;
use std::thread;

fn store_with(edit: impl FnOnce(&mut Config)) -> (Store, ManualClock) {
    let clock = ManualClock::new(100);
    let mut config = Config::default();
    edit(&mut config);
    (
        Store::new(config, Box::new(clock.clone())).expect("valid config"),
        clock,
    )
}

/// 64 segments of 64 KiB written through one lane: small enough that a test's stream of
/// items evicts, large enough for the ghost and the eviction's keep lane.
fn evicting_store() -> Store {
    store_with(|c| {
        c.cache_size = 64 << 16;
        c.segment_size = 1 << 16;
        c.lanes = 1;
    })
    .0
}

fn store() -> (Store, ManualClock) {
    store_with(|_| ())
}

fn put(s: &Store, key: &str, value: &str, op: StoreOp) -> Result<u64, Error> {
    let item = s.item(key.as_bytes(), value.as_bytes(), 7, 0)?;
    s.store(&item, op)
}

fn put_cas(s: &Store, key: &str, value: &str, op: StoreOp, cas: u64) -> Result<u64, Error> {
    let item = s.item(key.as_bytes(), value.as_bytes(), 7, 0)?;
    item.set_cas(cas);
    s.store(&item, op)
}

fn value(s: &Store, key: &str) -> Option<String> {
    s.get(key.as_bytes())
        .map(|item| String::from_utf8_lossy(&item.value()).into_owned())
}

#[test]
fn allocate_store_get_and_the_item_outlives_its_removal() {
    let (s, _) = store();
    // Filling an allocated item in place is the C boundary's business (its own `Bytes`); here
    // the value stays as allocated: zeroed.
    let item = s.allocate(b"k", 3, 42, 0).unwrap();
    let cas = s.store(&item, StoreOp::Set).unwrap();
    let held = s.get(b"k").unwrap();
    assert_eq!(
        (held.value(), held.flags(), held.cas()),
        (vec![0u8; 3], 42, cas)
    );
    put(&s, "k", "new", StoreOp::Set).unwrap();
    s.remove(b"k", 0).unwrap();
    s.flush(0);
    // Replaced, deleted and flushed: the holder still reads its item.
    assert_eq!(held.value(), [0u8; 3]);
    assert_eq!(held.key(), b"k");
    assert_eq!(value(&s, "k"), None);
}

#[test]
fn cas_values_are_unique_and_increase_and_use_cas_false_disables_them() {
    let (s, _) = store();
    let a = put(&s, "a", "1", StoreOp::Set).unwrap();
    let b = put(&s, "b", "1", StoreOp::Set).unwrap();
    let a2 = put(&s, "a", "2", StoreOp::Set).unwrap();
    assert!(0 < a && a < b && b < a2);
    assert_eq!(s.get(b"a").unwrap().cas(), a2);
    let (s, _) = store_with(|c| c.use_cas = false);
    assert_eq!(put(&s, "a", "1", StoreOp::Set), Ok(0));
    assert_eq!(s.get(b"a").unwrap().cas(), 0);
}

#[test]
fn add_set_replace() {
    let (s, _) = store();
    assert_eq!(put(&s, "k", "r", StoreOp::Replace), Err(Error::NotStored));
    put(&s, "k", "a", StoreOp::Add).unwrap();
    assert_eq!(put(&s, "k", "b", StoreOp::Add), Err(Error::NotStored));
    assert_eq!(value(&s, "k").as_deref(), Some("a"));
    put(&s, "k", "c", StoreOp::Replace).unwrap();
    put(&s, "k", "d", StoreOp::Set).unwrap();
    assert_eq!(value(&s, "k").as_deref(), Some("d"));
}

#[test]
fn append_and_prepend_keep_flags_and_expiry_and_need_the_key() {
    let (s, clock) = store();
    assert_eq!(put(&s, "k", "x", StoreOp::Append), Err(Error::NotStored));
    assert_eq!(put(&s, "k", "x", StoreOp::Prepend), Err(Error::NotStored));
    let item = s.item(b"k", b"mid", 3, 200).unwrap();
    let cas = s.store(&item, StoreOp::Set).unwrap();
    let item = s.item(b"k", b">", 99, 0).unwrap();
    let cas2 = s.store(&item, StoreOp::Append).unwrap();
    assert!(cas2 > cas);
    put(&s, "k", "<", StoreOp::Prepend).unwrap();
    let got = s.get(b"k").unwrap();
    assert_eq!(
        (got.value(), got.flags(), got.exptime()),
        (b"<mid>".to_vec(), 3, 200)
    );
    // A CAS given with append must match.
    assert_eq!(
        put_cas(&s, "k", "!", StoreOp::Append, 1),
        Err(Error::Exists)
    );
    put_cas(&s, "k", "!", StoreOp::Append, got.cas()).unwrap();
    clock.advance(100);
    assert_eq!(value(&s, "k"), None, "the kept expiry still applies");
}

#[test]
fn cas_store_and_remove_with_cas() {
    let (s, _) = store();
    assert_eq!(put_cas(&s, "k", "v", StoreOp::Cas, 5), Err(Error::NotFound));
    let cas = put(&s, "k", "v", StoreOp::Set).unwrap();
    assert_eq!(
        put_cas(&s, "k", "w", StoreOp::Cas, cas + 1),
        Err(Error::Exists)
    );
    let cas2 = put_cas(&s, "k", "w", StoreOp::Cas, cas).unwrap();
    assert!(cas2 > cas);
    assert_eq!(value(&s, "k").as_deref(), Some("w"));
    assert_eq!(s.remove(b"k", cas), Err(Error::Exists));
    assert_eq!(s.remove(b"k", cas2), Ok(()));
    assert_eq!(s.remove(b"k", 0), Err(Error::NotFound));
    put(&s, "k", "v", StoreOp::Set).unwrap();
    assert_eq!(s.remove(b"k", 0), Ok(()));
    let st = s.stats();
    assert_eq!(
        (st.cas_misses, st.cas_badval, st.cas_hits),
        (1, 1, 1),
        "{st:?}"
    );
    assert_eq!((st.delete_hits, st.delete_misses), (2, 2));
}

#[test]
fn incr_and_decr() {
    let (s, clock) = store();
    assert_eq!(s.arithmetic(b"n", true, 1, None), Err(Error::NotFound));
    let (v, cas) = s.arithmetic(b"n", true, 1, Some((10, 150))).unwrap();
    assert_eq!(v, 10, "created with the initial value");
    assert_eq!(s.get(b"n").unwrap().cas(), cas);
    let (v, cas2) = s.arithmetic(b"n", true, 5, Some((0, 0))).unwrap();
    assert_eq!(v, 15);
    assert!(cas2 > cas, "returns the new CAS");
    assert_eq!(value(&s, "n").as_deref(), Some("15"));
    assert_eq!(
        s.arithmetic(b"n", false, 100, None).unwrap().0,
        0,
        "decr floors at 0"
    );
    // As memcached: a shorter number keeps the length of the one it replaced, padded with
    // spaces, and reads back as a number; a longer one grows the value.
    assert_eq!(value(&s, "n").as_deref(), Some("0 "));
    assert_eq!(s.arithmetic(b"n", true, 100, None).unwrap().0, 100);
    assert_eq!(value(&s, "n").as_deref(), Some("100"));
    assert_eq!(s.arithmetic(b"n", false, 95, None).unwrap().0, 5);
    assert_eq!(value(&s, "n").as_deref(), Some("5  "));
    put(&s, "big", "18446744073709551615", StoreOp::Set).unwrap();
    assert_eq!(
        s.arithmetic(b"big", true, 2, None).unwrap().0,
        1,
        "incr wraps"
    );
    put(&s, "text", "abc", StoreOp::Set).unwrap();
    assert_eq!(s.arithmetic(b"text", true, 1, None), Err(Error::NotNumeric));
    assert_eq!(value(&s, "text").as_deref(), Some("abc"));
    // The created item got the asked expiry.
    clock.advance(50);
    assert_eq!(value(&s, "n"), None);
    // Counted as memcached counts them: neither the creating miss nor the value that is no
    // number.
    let st = s.stats();
    assert_eq!((st.incr_hits, st.incr_misses, st.decr_hits), (3, 1, 2));
}

#[test]
fn concurrent_incr_and_decr_never_lose_an_update() {
    let (s, _) = store();
    let s = Arc::new(s);
    put(&s, "n", "1000000", StoreOp::Set).unwrap();
    let threads: Vec<_> = (0..4)
        .map(|t| {
            let s = Arc::clone(&s);
            thread::spawn(move || {
                for _ in 0..500 {
                    s.arithmetic(b"n", t % 2 == 0, 3, None).unwrap();
                    s.arithmetic(b"n", true, 1, None).unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    // Two threads add 3, two subtract 3; all four add 1, 500 times each.
    assert_eq!(value(&s, "n").as_deref(), Some("1002000"));
}

#[test]
fn expired_items_are_invisible_and_reclaimed() {
    let (s, clock) = store();
    let item = s.item(b"k", b"v", 0, 110).unwrap();
    s.store(&item, StoreOp::Set).unwrap();
    put(&s, "forever", "v", StoreOp::Set).unwrap();
    clock.advance(9);
    assert!(s.get(b"k").is_some());
    clock.advance(1);
    assert!(s.get(b"k").is_none(), "expired at its exptime");
    assert_eq!(put(&s, "k", "x", StoreOp::Replace), Err(Error::NotStored));
    put(&s, "k", "x", StoreOp::Add).unwrap();
    assert_eq!(value(&s, "forever").as_deref(), Some("v"));
    let st = s.stats();
    assert_eq!(st.reclaimed, 1, "{st:?}");
    assert_eq!(st.curr_items, 2);
}

#[test]
fn touch_sets_a_new_expiry() {
    let (s, clock) = store();
    assert!(s.touch(b"k", 0).is_none());
    put(&s, "k", "v", StoreOp::Set).unwrap();
    let item = s.touch(b"k", 105).unwrap();
    assert_eq!((item.value(), item.exptime()), (b"v".to_vec(), 105));
    clock.advance(5);
    assert!(s.get(b"k").is_none());
    let st = s.stats();
    assert_eq!((st.touch_hits, st.touch_misses), (1, 1));
}

#[test]
fn flush_now_hides_everything_stored_before_it() {
    let (s, _) = store();
    put(&s, "a", "1", StoreOp::Set).unwrap();
    put(&s, "b", "1", StoreOp::Set).unwrap();
    s.flush(0);
    assert_eq!((value(&s, "a"), value(&s, "b")), (None, None));
    assert_eq!(s.stats().curr_items, 0);
    put(&s, "a", "2", StoreOp::Set).unwrap();
    assert_eq!(
        value(&s, "a").as_deref(),
        Some("2"),
        "stored after the flush"
    );
}

#[test]
fn a_delayed_flush_hides_what_was_stored_before_its_time() {
    let (s, clock) = store();
    put(&s, "old", "1", StoreOp::Set).unwrap();
    s.flush(110);
    clock.advance(5);
    put(&s, "mid", "1", StoreOp::Set).unwrap();
    assert_eq!(value(&s, "old").as_deref(), Some("1"), "not yet");
    clock.advance(5);
    put(&s, "new", "1", StoreOp::Set).unwrap();
    assert_eq!((value(&s, "old"), value(&s, "mid")), (None, None));
    assert_eq!(value(&s, "new").as_deref(), Some("1"));
}

#[test]
fn keys_and_item_sizes_are_limited() {
    let (s, _) = store_with(|c| c.item_size_max = 4096);
    assert_eq!(s.item(b"", b"v", 0, 0).unwrap_err(), Error::BadKey);
    let long = vec![b'k'; KEY_MAX];
    assert!(s.item(&long, b"v", 0, 0).is_ok());
    let longer = vec![b'k'; KEY_MAX + 1];
    assert_eq!(s.item(&longer, b"v", 0, 0).unwrap_err(), Error::BadKey);
    assert_eq!(s.allocate(b"k", 4096, 0, 0).unwrap_err(), Error::TooBig);
    assert!(s.allocate(b"k", 4096 - 1 - ITEM_OVERHEAD, 0, 0).is_ok());
    // Appending past the limit is refused too.
    put(&s, "k", &"x".repeat(3000), StoreOp::Set).unwrap();
    assert_eq!(
        put(&s, "k", &"y".repeat(1100), StoreOp::Append),
        Err(Error::TooBig)
    );
}

#[test]
fn a_tiny_cache_still_holds_the_largest_item_with_eviction_on() {
    let (s, _) = store_with(|c| c.cache_size = 1000);
    let big = vec![b'x'; PAGE_SIZE - 100 - ITEM_OVERHEAD];
    for i in 0..3 {
        let item = s.item(format!("big{i}").as_bytes(), &big, 0, 0).unwrap();
        s.store(&item, StoreOp::Set).unwrap();
    }
    assert_eq!(s.get(b"big2").unwrap().value().len(), big.len());
    let st = s.stats();
    assert_eq!(st.evictions, 2, "{st:?}");
    assert_eq!(st.engine_maxbytes, 1000);
}

#[test]
fn without_eviction_a_full_cache_answers_no_memory_and_keeps_its_items() {
    let (s, _) = store_with(|c| {
        c.eviction = false;
        c.cache_size = 0;
        c.lanes = 1;
    });
    let chunk = vec![b'x'; 100_000];
    let mut stored = 0;
    let err = loop {
        match s
            .item(format!("k{stored}").as_bytes(), &chunk, 0, 0)
            .map(|i| s.store(&i, StoreOp::Set))
        {
            Ok(Ok(_)) => stored += 1,
            Ok(Err(e)) | Err(e) => break e,
        }
    };
    assert_eq!(err, Error::NoMemory);
    assert!(stored >= 9);
    assert!((0..stored).all(|i| s.get(format!("k{i}").as_bytes()).is_some()));
    // Growing an item that no longer fits keeps the old one.
    let more = vec![b'y'; 200_000];
    let item = s.item(b"k0", &more, 0, 0).unwrap();
    assert_eq!(s.store(&item, StoreOp::Set), Err(Error::NoMemory));
    assert_eq!(s.get(b"k0").unwrap().value().len(), chunk.len());
    assert_eq!(s.stats().evictions, 0);
}

#[test]
fn an_item_read_recently_outlives_untouched_items_stored_before_it() {
    let (s, _) = store_with(|c| {
        c.cache_size = 8 * PAGE_SIZE;
        c.lanes = 1;
    });
    let chunk = vec![b'x'; 50_000];
    let set = |i: usize| {
        let item = s.item(format!("k{i}").as_bytes(), &chunk, 0, 0).unwrap();
        s.store(&item, StoreOp::Set).unwrap();
    };
    for i in 0..10 {
        set(i);
    }
    assert!(s.get(b"k0").is_some(), "k0 is read");
    // Fill until something is evicted, then a bit more.
    let mut i = 10;
    while s.stats().evictions < 5 {
        set(i);
        i += 1;
    }
    assert!(s.get(b"k0").is_some(), "the read item survives");
    let gone: Vec<usize> = (1..i)
        .filter(|k| s.get(format!("k{k}").as_bytes()).is_none())
        .collect();
    assert_eq!(
        gone,
        (1..=gone.len()).collect::<Vec<_>>(),
        "oldest untouched first"
    );
    assert!(!gone.is_empty());
}

#[test]
fn a_stream_of_items_written_once_passes_through_without_evicting_items_read_since() {
    // S3-FIFO by segments: what an eviction kept (read since written) waits in the main
    // queue, while the new items' small queue gives the victims. A FIFO, with or without a
    // second chance, lets a stream of three caches' worth push the read items out.
    let s = evicting_store();
    let value = "v".repeat(100);
    let read = 8_000;
    for i in 0..read {
        put(&s, &format!("read:{i:06}"), &value, StoreOp::Set).unwrap();
    }
    for i in 0..read {
        assert!(s.get(format!("read:{i:06}").as_bytes()).is_some());
    }
    for i in 0..100_000 {
        put(&s, &format!("once:{i:06}"), &value, StoreOp::Set).unwrap();
    }
    let kept = (0..read)
        .filter(|i| s.get(format!("read:{i:06}").as_bytes()).is_some())
        .count();
    assert!(kept > read * 9 / 10, "{kept} of {read} read items kept");
}

#[test]
fn a_reader_pinned_through_a_fill_holds_the_index_doubling_back_but_costs_no_item() {
    // The index doubles into the table it left a doubling ago, once no reader can still read
    // that one: a thread pinned meanwhile (a reader descheduled on a loaded machine) holds the
    // next doubling back. A write whose key's buckets are full then waits for it, rather than
    // evict an item from a table far from full.
    let s = Arc::new(evicting_store());
    let value = "v".repeat(100);
    let n = 8_000;
    let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (pinned, is_pinned) = std::sync::mpsc::channel();
    let reader = {
        let (s, done) = (Arc::clone(&s), Arc::clone(&done));
        thread::spawn(move || {
            let _pin = s.pin();
            pinned.send(()).unwrap();
            // About 300 ms, or until the writer is done (which it is not, if it waits).
            for _ in 0..300 {
                // SeqCst: a test's flag.
                if done.load(std::sync::atomic::Ordering::SeqCst) {
                    break;
                }
                thread::sleep(std::time::Duration::from_millis(1));
            }
        })
    };
    is_pinned.recv().unwrap();
    for i in 0..n {
        put(&s, &format!("fill:{i:06}"), &value, StoreOp::Set).unwrap();
    }
    done.store(true, std::sync::atomic::Ordering::SeqCst);
    reader.join().unwrap();
    let kept = (0..n)
        .filter(|i| s.get(format!("fill:{i:06}").as_bytes()).is_some())
        .count();
    assert_eq!((kept, s.stats().evictions), (n, 0));
}

#[test]
fn an_eviction_keeps_a_large_item_only_if_it_was_read_twice() {
    // Room for a large item read once would hold several small ones read as often: an
    // eviction keeps an item read once only up to a bit over its segment's mean item, one
    // read twice whatever its size.
    let s = evicting_store();
    let (small, large) = ("v".repeat(100), "v".repeat(1_000));
    let n = 300;
    let key = |kind: &str, i: usize| format!("{kind}:{i:06}");
    for i in 0..n {
        put(&s, &key("small", i), &small, StoreOp::Set).unwrap();
        put(&s, &key("once", i), &large, StoreOp::Set).unwrap();
        put(&s, &key("twice", i), &large, StoreOp::Set).unwrap();
    }
    for i in 0..n {
        assert!(s.get(key("small", i).as_bytes()).is_some());
        assert!(s.get(key("once", i).as_bytes()).is_some());
        for _ in 0..2 {
            assert!(s.get(key("twice", i).as_bytes()).is_some());
        }
    }
    for i in 0..100_000 {
        put(&s, &key("stream", i), &small, StoreOp::Set).unwrap();
    }
    let kept = |kind: &str| {
        (0..n)
            .filter(|&i| s.get(key(kind, i).as_bytes()).is_some())
            .count()
    };
    let (small_kept, once_kept, twice_kept) = (kept("small"), kept("once"), kept("twice"));
    assert!(
        small_kept > n * 9 / 10,
        "{small_kept} of {n} small items kept"
    );
    assert!(
        twice_kept > n * 9 / 10,
        "{twice_kept} of {n} large items read twice kept"
    );
    assert_eq!(once_kept, 0, "large items read once kept");
}

#[test]
fn a_key_evicted_unread_and_stored_again_soon_is_kept_as_if_it_was_read() {
    // S3-FIFO's ghost: a key the small queue dropped before anyone read it, stored again while
    // the ghost remembers it, starts as read, so that a stream of items written once passes
    // it by as it passes the items read since written. A key stored for the first time at the
    // same moment is not kept. (In a cache somebody reads: one hit arms the eviction's lane;
    // a cache nobody reads keeps nothing.)
    let s = evicting_store();
    let value = "v".repeat(100);
    put(&s, "read", &value, StoreOp::Set).unwrap();
    assert!(s.get(b"read").is_some());
    let n = 2_000;
    let back = |i: usize| format!("back:{i:06}");
    let fresh = |i: usize| format!("fresh:{i:06}");
    for i in 0..n {
        put(&s, &back(i), &value, StoreOp::Set).unwrap();
    }
    let mut once = 0;
    let mut stream = |count: usize| {
        for _ in 0..count {
            put(&s, &format!("once:{once:06}"), &value, StoreOp::Set).unwrap();
            once += 1;
        }
    };
    // The oldest items go first: once as many are evicted, every `back` key is gone (a get
    // that misses marks nothing read).
    while s.stats().evictions < n as u64 {
        stream(100);
    }
    assert!((0..n).all(|i| s.get(back(i).as_bytes()).is_none()));
    for i in 0..n {
        put(&s, &back(i), &value, StoreOp::Set).unwrap();
        put(&s, &fresh(i), &value, StoreOp::Set).unwrap();
    }
    stream(100_000);
    let kept = |key: &dyn Fn(usize) -> String| {
        (0..n)
            .filter(|&i| s.get(key(i).as_bytes()).is_some())
            .count()
    };
    let (back_kept, fresh_kept) = (kept(&back), kept(&fresh));
    assert!(back_kept > n / 2, "{back_kept} of {n} keys back kept");
    assert!(fresh_kept < n / 10, "{fresh_kept} of {n} new keys kept");
}

#[test]
fn stats_count_and_reset() {
    let (s, _) = store_with(|c| c.cache_size = 12345);
    put(&s, "a", "1", StoreOp::Set).unwrap();
    put(&s, "b", "22", StoreOp::Set).unwrap();
    put(&s, "a", "333", StoreOp::Set).unwrap();
    assert!(s.get(b"a").is_some());
    assert!(s.get(b"zz").is_none());
    let st = s.stats();
    assert_eq!(
        (
            st.curr_items,
            st.total_items,
            st.cmd_set,
            st.cmd_get,
            st.get_hits,
            st.get_misses
        ),
        (2, 3, 3, 2, 1, 1)
    );
    assert_eq!(st.engine_maxbytes, 12345);
    // Keys, values and headers (with CAS and flags: 16 bytes), each rounded to 4 bytes.
    assert_eq!(st.bytes, (16 + 4) * 2);
    s.reset_stats();
    let after = s.stats();
    assert_eq!(
        (after.total_items, after.cmd_get, after.evictions),
        (0, 0, 0)
    );
    assert_eq!((after.curr_items, after.bytes), (st.curr_items, st.bytes));
    assert_eq!(after.pairs()[0], ("curr_items", 2));
}

#[test]
fn invalid_settings_are_refused() {
    let clock = || Box::new(ManualClock::default());
    let config = Config {
        item_size_max: 10,
        ..Config::default()
    };
    assert!(matches!(
        Store::new(config, clock()),
        Err(Error::InvalidConfig(_))
    ));
}

#[test]
fn scrub_takes_back_expired_items_and_keeps_live_ones() {
    let (s, clock) = store();
    let expiring = s.item(b"soon", b"v", 0, 105).unwrap();
    s.store(&expiring, StoreOp::Set).unwrap();
    put(&s, "forever", "v", StoreOp::Set).unwrap();
    assert_eq!(s.scrub(), 0, "nothing has expired yet");
    assert_eq!(s.stats().curr_items, 2);
    clock.advance(5);
    assert_eq!(s.scrub(), 1);
    let stats = s.stats();
    assert_eq!((stats.curr_items, stats.reclaimed), (1, 1));
    assert_eq!(value(&s, "forever").as_deref(), Some("v"));
}

/// Items cross the C boundary as tokens (`ffi`'s storage engine), segment items and large ones.
#[test]
fn tokens_round_trip_for_segment_items_and_large_ones() {
    let config = Config {
        item_size_max: 4 << 20,
        ..Config::default()
    };
    let store = Store::new(config, Box::new(ManualClock::new(1))).unwrap();
    let small = store.item(b"small", b"v", 0, 0).unwrap();
    let large = store.item(b"large", &vec![7; 2 << 20], 0, 0).unwrap();
    assert!(small.in_segment() && !large.in_segment());
    for item in [small, large] {
        let key = item.key();
        let token = store.into_token(item);
        assert_ne!(token, 0);
        store.with_token(token, |item| {
            assert_eq!(item.key(), key);
            store.store(item, StoreOp::Set).unwrap();
        });
        store.release_token(token);
        let got = store.get(&key).unwrap();
        let token = store.into_token(got);
        store.with_token(token, |item| assert_eq!(item.key(), key));
        store.release_token(token);
    }
    assert_eq!(store.get(b"large").unwrap().value_len(), 2 << 20);
}

#[test]
fn a_cache_far_from_full_evicts_nothing_while_its_index_grows() {
    // 64 MiB holds ~500k small items; 100k must all stay (the index doubles under them).
    const N: usize = 100_000;
    let (s, _) = store();
    for i in 0..N {
        let key = format!("key:{i}");
        put(&s, &key, &key, StoreOp::Set).unwrap();
    }
    let st = s.stats();
    let missing = (0..N)
        .filter(|i| s.get(format!("key:{i}").as_bytes()).is_none())
        .count();
    assert_eq!((st.evictions, st.curr_items, missing), (0, N as u64, 0));
}

#[test]
fn a_cache_between_powers_of_two_fills_its_segments_with_small_items() {
    // 22 MiB: the segments hold about 150,000 items of a 12-byte key and a 100-byte value
    // (22 MiB is the index's 2 MiB and 20 segments to the byte, so the ghost's 256 KiB take
    // one segment's room), 150,848 here alone; a segment or two (8,400 items each) may wait
    // retired while another test's thread holds up the process-wide collector (142,656 seen
    // under load). An index rounded down to 131,072 slots kept about 124,000.
    let (s, _) = store_with(|c| c.cache_size = 22 << 20);
    let value = "v".repeat(100);
    for i in 0..200_000 {
        put(&s, &format!("key:{i:08}"), &value, StoreOp::Set).unwrap();
    }
    let kept = s.stats().curr_items;
    assert!(kept > 135_000, "{kept} items kept");
}

#[test]
fn a_fetch_notes_the_access_at_its_lookup_time_and_a_get_does_not() {
    let (s, clock) = store();
    put(&s, "k", "v", StoreOp::Set).unwrap();
    let written = s.get(b"k").unwrap().access();
    assert!(!written.0, "a get leaves the fetched mark clear");
    clock.advance(61);
    assert_eq!(
        s.get(b"k").unwrap().access(),
        written,
        "nor the access time"
    );
    assert_eq!(s.fetch(b"k").unwrap().access(), (true, 161));
    assert_eq!(s.get(b"k").unwrap().access(), (true, 161));
}

/// Our host's turns (`end_turn`): an item a turn handed out and still out when the turn ends
/// keeps its segment from reuse (it was replaced, so no eviction keeps it) while the writes
/// after it evict the whole cache several times; they go on meanwhile.
#[test]
fn an_item_out_at_the_end_of_its_turn_outlives_the_eviction_of_its_segment() {
    let s = evicting_store();
    let long = "v".repeat(1000);
    put(&s, "k", &long, StoreOp::Set).unwrap();
    // A thread of its own: turns are per thread, and the harness may run other tests here.
    mcb_core::sync::thread::scope(|scope| {
        scope.spawn(|| {
            let end = || end_turn(|_, count| count(&s));
            end();
            let token = s.fetch_token(b"k").unwrap();
            end();
            put(&s, "k", "new", StoreOp::Set).unwrap();
            for i in 0..20_000 {
                put(&s, &format!("key:{i}"), &long, StoreOp::Set).unwrap();
            }
            assert!(s.stats().evictions > 15_000, "the cache turned over");
            s.with_token(token, |item| {
                let (key, value) = (item.key(), item.value());
                let kept = key == b"k" && value == long.as_bytes();
                assert!(
                    kept,
                    "its segment was reused: {}",
                    String::from_utf8_lossy(&key)
                );
            });
            s.release_token(token);
        });
    });
}
