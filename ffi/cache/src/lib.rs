//! The cache tiers for C (`include/mcb_cache.h`): an L2 store shared by caches, caches with a
//! per-thread L1 and a loader callback run by one caller at a time per key.
//!
//! Values are byte strings. Whatever we hand back (`mcb_cache_value.bytes`) is allocated with
//! `malloc` and released with [`mcb_cache_value_free`]; [`mcb_cache_get_into`] copies into the
//! caller's buffer instead. Every function is safe to call from
//! many threads at once; a loader passed to [`mcb_cache_get_bulk`] may run on threads the call
//! starts. Lengths are in bytes; times in milliseconds.

#![allow(non_camel_case_types)]

use mcb_abi::boundary::guard;
use mcb_core::sync::PayloadArc;
use mcb_core::tiers::{
    self, Admission, BulkOp, CallOptions, Level, LockOptions, Options, Promotion,
};
use std::ffi::{c_char, c_void, CStr};
use std::ptr;
use std::time::Duration;

/// What a call returns.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum mcb_cache_status {
    /// Success.
    MCB_CACHE_OK = 0,
    /// A null pointer, a negative ttl, zero capacity or tries, a zero resurrect ttl, an unknown
    /// promotion or admission rule...
    MCB_CACHE_INVALID_ARGUMENT = 1,
    /// The loader reported an error (or a bad result); nothing was cached.
    MCB_CACHE_LOADER_FAILED = 2,
    /// Another caller held the key's lock past the lock timeout and no stale value stood in.
    MCB_CACHE_LOCK_TIMEOUT = 3,
    /// The L2 store had no room after the configured tries (`mcb_cache_set` only).
    MCB_CACHE_L2_FULL = 4,
    /// `malloc` failed.
    MCB_CACHE_OUT_OF_MEMORY = 5,
    /// A bug: Rust code panicked. The cache is still usable.
    MCB_CACHE_PANIC = 6,
    /// The caller's buffer is too small for the value (`mcb_cache_get_into`); the length it
    /// needs is in `out->len`.
    MCB_CACHE_BUFFER_TOO_SMALL = 7,
}

use mcb_cache_status::*;

/// Loader result: a value (in `mcb_cache_loaded.value`).
pub const MCB_CACHE_LOAD_VALUE: i32 = 0;
/// Loader result: "no value" (cached for the neg ttl).
pub const MCB_CACHE_LOAD_NO_VALUE: i32 = 1;
/// Loader result: an error (nothing cached; a stale value may be resurrected).
pub const MCB_CACHE_LOAD_ERROR: i32 = 2;

/// `ttl_ms` meaning "the cache's ttl" (in `mcb_cache_loaded` and `mcb_cache_set`).
pub const MCB_CACHE_TTL_DEFAULT: i64 = -1;
/// `resurrect_ttl_ms` meaning "no resurrection".
pub const MCB_CACHE_NO_RESURRECT: i64 = -1;

/// `promotion`: every L2 hit goes to this thread's L1 (the default, as in lua-resty-mlcache).
pub const MCB_CACHE_PROMOTE_ALWAYS: i32 = 0;
/// `promotion`: a key's second L1 miss on this thread within about `l1_capacity` misses goes
/// to L1, so that keys read once stay in L2 and L1 holds what this thread reads again.
pub const MCB_CACHE_PROMOTE_SECOND_HIT: i32 = 1;

/// `admission`: a full L2 keeps every loaded value, evicting for it (the default, as in
/// lua-resty-mlcache).
pub const MCB_CACHE_ADMIT_ALWAYS: i32 = 0;
/// `admission`: a full L2 keeps a loaded value only if its key was asked for more often lately
/// than the entry it would evict (TinyLFU; the caller gets its value either way, and its L1
/// keeps it). `mcb_cache_set` always stores.
pub const MCB_CACHE_ADMIT_FREQUENCY: i32 = 1;

/// Where a value came from (`mcb_cache_value.level`), as in lua-resty-mlcache.
pub const MCB_CACHE_LEVEL_MISS: i32 = -1;
/// This thread's L1.
pub const MCB_CACHE_LEVEL_L1: i32 = 1;
/// The shared L2.
pub const MCB_CACHE_LEVEL_L2: i32 = 2;
/// The loader.
pub const MCB_CACHE_LEVEL_L3: i32 = 3;
/// A stale value, served because the loader failed or its lock timed out.
pub const MCB_CACHE_LEVEL_STALE: i32 = 4;

/// Cache options; fill with [`mcb_cache_options_default`], then change what you need.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct mcb_cache_options {
    /// Entries in each thread's L1 (> 0).
    pub l1_capacity: usize,
    /// Time to live of values; 0 = forever; negative is rejected.
    pub ttl_ms: i64,
    /// Time to live of cached misses; 0 = forever; negative is rejected.
    pub neg_ttl_ms: i64,
    /// How long a stale value is put back when its loader fails; `MCB_CACHE_NO_RESURRECT` for
    /// never; 0 and other negatives are rejected.
    pub resurrect_ttl_ms: i64,
    /// How long a caller waits for another caller's loader (>= 0).
    pub lock_timeout_ms: i64,
    /// How long a loader may hold its lock before another caller takes over (>= 0).
    pub lock_expiry_ms: i64,
    /// Tries to make room in a full L2 (> 0).
    pub set_tries: u32,
    /// Which L2 hits go to L1: `MCB_CACHE_PROMOTE_*`. Caches of one name share a thread's L1:
    /// the first to use it on a thread picks its rule.
    pub promotion: i32,
    /// Which loaded values a full L2 keeps: `MCB_CACHE_ADMIT_*`.
    pub admission: i32,
}

/// What a loader hands back; `ttl_ms` arrives set to `MCB_CACHE_TTL_DEFAULT`.
#[repr(C)]
#[derive(Debug)]
pub struct mcb_cache_loaded {
    /// The value's bytes (for `MCB_CACHE_LOAD_VALUE`), copied when the loader returns.
    pub value: *const u8,
    /// Their length.
    pub value_len: usize,
    /// `MCB_CACHE_TTL_DEFAULT`, 0 (forever), a ttl in ms, or another negative number: return
    /// the value without caching it.
    pub ttl_ms: i64,
}

/// A loader: fills `out` and returns one of `MCB_CACHE_LOAD_*`. It runs without any cache
/// lock held except the key's own loader lock.
pub type mcb_cache_loader = Option<
    unsafe extern "C" fn(
        ctx: *mut c_void,
        key: *const u8,
        key_len: usize,
        out: *mut mcb_cache_loaded,
    ) -> i32,
>;

/// A value handed to C. Free `bytes` with [`mcb_cache_value_free`].
#[repr(C)]
#[derive(Debug)]
pub struct mcb_cache_value {
    /// The bytes (`malloc`ed), or NULL when `has_value` is false.
    pub bytes: *mut u8,
    /// Their length.
    pub len: usize,
    /// False for "no value" (a miss, or a cached miss).
    pub has_value: bool,
    /// One of `MCB_CACHE_LEVEL_*`.
    pub level: i32,
}

/// What [`mcb_cache_get_into`] copied into the caller's buffer.
#[repr(C)]
#[derive(Debug)]
pub struct mcb_cache_copied {
    /// The value's length (also when the buffer was too small for it).
    pub len: usize,
    /// False for "no value" (a miss, or a cached miss).
    pub has_value: bool,
    /// One of `MCB_CACHE_LEVEL_*`.
    pub level: i32,
}

/// What [`mcb_cache_peek`] saw.
#[repr(C)]
#[derive(Debug)]
pub struct mcb_cache_peeked {
    /// False when L2 holds nothing for the key (then nothing else is set).
    pub present: bool,
    /// The value (its `level` is `MCB_CACHE_LEVEL_L2`); free it with `mcb_cache_value_free`.
    pub value: mcb_cache_value,
    /// Time left before it goes stale; -1 for never; once stale, minus how long ago it went
    /// stale (lua-resty-mlcache's negative ttl).
    pub remaining_ms: i64,
    /// Whether it has expired (kept until evicted).
    pub stale: bool,
}

/// One operation of [`mcb_cache_get_bulk`].
#[repr(C)]
#[derive(Debug)]
pub struct mcb_cache_bulk_op {
    /// The key.
    pub key: *const u8,
    /// Its length.
    pub key_len: usize,
    /// The loader for a miss, or NULL.
    pub loader: mcb_cache_loader,
    /// Passed to the loader.
    pub ctx: *mut c_void,
}

/// One result of [`mcb_cache_get_bulk`].
#[repr(C)]
#[derive(Debug)]
pub struct mcb_cache_bulk_result {
    /// This operation's status.
    pub status: mcb_cache_status,
    /// Its value when `status` is `MCB_CACHE_OK`.
    pub value: mcb_cache_value,
}

/// An L2 store, shared by the caches created on it. Opaque.
#[derive(Debug)]
pub struct mcb_l2(PayloadArc<tiers::L2<Vec<u8>>>);

/// A cache. Opaque.
#[derive(Debug)]
pub struct mcb_cache(tiers::Cache<Vec<u8>>);

/// Creates an L2 store of `capacity_bytes` split over `shards` (0: chosen from the CPU count);
/// a value larger than one shard cannot be stored. Free it with [`mcb_l2_free`] (caches
/// created on it keep it alive).
///
/// # Safety
/// `out` must be valid for a write.
#[no_mangle]
pub unsafe extern "C" fn mcb_l2_new(
    capacity_bytes: usize,
    shards: usize,
    out: *mut *mut mcb_l2,
) -> mcb_cache_status {
    guard(MCB_CACHE_PANIC, || {
        if out.is_null() {
            return MCB_CACHE_INVALID_ARGUMENT;
        }
        let store = if shards == 0 {
            tiers::L2::new(capacity_bytes)
        } else {
            tiers::L2::with_shards(capacity_bytes, shards)
        };
        let Ok(store) = store else {
            return MCB_CACHE_INVALID_ARGUMENT;
        };
        let store = Box::new(mcb_l2(PayloadArc::new(store.weigh_with(Vec::len))));
        // SAFETY: `out` is non-null and valid for a write (caller's contract).
        unsafe { out.write(Box::into_raw(store)) };
        MCB_CACHE_OK
    })
}

/// Frees a store from [`mcb_l2_new`]; NULL does nothing.
///
/// # Safety
/// `l2` is NULL or came from `mcb_l2_new` and is not used afterwards.
#[no_mangle]
pub unsafe extern "C" fn mcb_l2_free(l2: *mut mcb_l2) {
    guard((), || {
        if !l2.is_null() {
            // SAFETY: from `mcb_l2_new` (Box::into_raw), freed once (caller's contract).
            drop(unsafe { Box::from_raw(l2) });
        }
    });
}

/// Fills `out` with the defaults (lua-resty-mlcache's): L1 of 100, ttl 30 s, neg ttl 5 s, no
/// resurrection, lock timeout 5 s and expiry 30 s, 3 tries, every L2 hit promoted, every
/// loaded value kept.
///
/// # Safety
/// `out` is NULL (then nothing happens) or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn mcb_cache_options_default(out: *mut mcb_cache_options) {
    guard((), || {
        let defaults = Options::<Vec<u8>>::default();
        let options = mcb_cache_options {
            l1_capacity: defaults.l1_capacity,
            ttl_ms: ms(defaults.ttl),
            neg_ttl_ms: ms(defaults.neg_ttl),
            resurrect_ttl_ms: MCB_CACHE_NO_RESURRECT,
            lock_timeout_ms: ms(defaults.lock.timeout),
            lock_expiry_ms: ms(defaults.lock.expiry),
            set_tries: defaults.set_tries,
            promotion: match defaults.promotion {
                Promotion::Always => MCB_CACHE_PROMOTE_ALWAYS,
                Promotion::SecondHit => MCB_CACHE_PROMOTE_SECOND_HIT,
            },
            admission: match defaults.admission {
                Admission::Always => MCB_CACHE_ADMIT_ALWAYS,
                Admission::Frequency => MCB_CACHE_ADMIT_FREQUENCY,
            },
        };
        if !out.is_null() {
            // SAFETY: non-null and valid for a write (caller's contract).
            unsafe { out.write(options) };
        }
    });
}

/// Whole milliseconds as C sees them.
fn ms(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

/// A non-negative number of milliseconds.
fn millis(ms: i64) -> Option<Duration> {
    u64::try_from(ms).ok().map(Duration::from_millis)
}

fn options(c: &mcb_cache_options, misses: Option<&mcb_l2>) -> Option<Options<Vec<u8>>> {
    let resurrect_ttl = match c.resurrect_ttl_ms {
        MCB_CACHE_NO_RESURRECT => None,
        ms => Some(millis(ms)?),
    };
    Some(Options {
        l1_capacity: c.l1_capacity,
        ttl: millis(c.ttl_ms)?,
        neg_ttl: millis(c.neg_ttl_ms)?,
        resurrect_ttl,
        lock: LockOptions {
            timeout: millis(c.lock_timeout_ms)?,
            expiry: millis(c.lock_expiry_ms)?,
        },
        set_tries: c.set_tries,
        miss_store: misses.map(|m| m.0.clone()),
        promotion: match c.promotion {
            MCB_CACHE_PROMOTE_ALWAYS => Promotion::Always,
            MCB_CACHE_PROMOTE_SECOND_HIT => Promotion::SecondHit,
            _ => return None,
        },
        admission: match c.admission {
            MCB_CACHE_ADMIT_ALWAYS => Admission::Always,
            MCB_CACHE_ADMIT_FREQUENCY => Admission::Frequency,
            _ => return None,
        },
        ..Options::default()
    })
}

/// Creates the cache `name` (NUL-terminated UTF-8) on `l2`; caches with one name on one store share
/// entries, caches with different names never see each other's. `opts` NULL means defaults;
/// `miss_store` (may be NULL) keeps cached misses apart. Free it with [`mcb_cache_free`].
///
/// # Safety
/// `l2` from `mcb_l2_new`; `name` a NUL-terminated string (not UTF-8: rejected); `opts` NULL or valid;
/// `miss_store` NULL or from `mcb_l2_new`; `out` valid for a write.
#[no_mangle]
pub unsafe extern "C" fn mcb_cache_new(
    l2: *const mcb_l2,
    name: *const c_char,
    opts: *const mcb_cache_options,
    miss_store: *const mcb_l2,
    out: *mut *mut mcb_cache,
) -> mcb_cache_status {
    guard(MCB_CACHE_PANIC, || {
        if l2.is_null() || name.is_null() || out.is_null() {
            return MCB_CACHE_INVALID_ARGUMENT;
        }
        // SAFETY: non-null pointers the caller vouches for (see `# Safety`).
        let (l2, name, opts, misses) = unsafe {
            (
                &*l2,
                CStr::from_ptr(name),
                opts.as_ref(),
                miss_store.as_ref(),
            )
        };
        let mut defaults = mcb_cache_options {
            l1_capacity: 0,
            ttl_ms: 0,
            neg_ttl_ms: 0,
            resurrect_ttl_ms: 0,
            lock_timeout_ms: 0,
            lock_expiry_ms: 0,
            set_tries: 0,
            promotion: 0,
            admission: 0,
        };
        // SAFETY: a valid local.
        unsafe { mcb_cache_options_default(&mut defaults) };
        let (Ok(name), Some(opts)) = (name.to_str(), options(opts.unwrap_or(&defaults), misses))
        else {
            return MCB_CACHE_INVALID_ARGUMENT;
        };
        match tiers::Cache::new(name, l2.0.clone(), opts) {
            Ok(cache) => {
                // SAFETY: non-null and valid for a write (caller's contract).
                unsafe { out.write(Box::into_raw(Box::new(mcb_cache(cache)))) };
                MCB_CACHE_OK
            }
            Err(err) => status(&err),
        }
    })
}

/// Frees a cache from [`mcb_cache_new`]; NULL does nothing.
///
/// # Safety
/// `cache` is NULL or came from `mcb_cache_new` and is not used afterwards (by any thread).
#[no_mangle]
pub unsafe extern "C" fn mcb_cache_free(cache: *mut mcb_cache) {
    guard((), || {
        if !cache.is_null() {
            // SAFETY: from `mcb_cache_new` (Box::into_raw), freed once (caller's contract).
            drop(unsafe { Box::from_raw(cache) });
        }
    });
}

fn status(err: &tiers::Error) -> mcb_cache_status {
    match err {
        tiers::Error::InvalidOption(_) => MCB_CACHE_INVALID_ARGUMENT,
        tiers::Error::Loader(_) | tiers::Error::LoaderPanicked(_) | tiers::Error::Transform(_) => {
            MCB_CACHE_LOADER_FAILED
        }
        tiers::Error::LockTimeout => MCB_CACHE_LOCK_TIMEOUT,
        tiers::Error::L2Full { .. } => MCB_CACHE_L2_FULL,
    }
}

/// The bytes C passed, or `None` for a null pointer with a non-zero length.
///
/// # Safety
/// `ptr` is NULL or valid for reads of `len` bytes for `'a`.
unsafe fn bytes<'a>(ptr: *const u8, len: usize) -> Option<&'a [u8]> {
    if len == 0 {
        return Some(&[]);
    }
    // SAFETY: non-null and valid for `len` bytes (caller's contract).
    (!ptr.is_null()).then(|| unsafe { std::slice::from_raw_parts(ptr, len) })
}

/// Copies a value into `malloc`ed memory for C.
fn to_c(value: Option<&[u8]>, level: Level) -> Option<mcb_cache_value> {
    let Some(value) = value else {
        return Some(mcb_cache_value {
            bytes: ptr::null_mut(),
            len: 0,
            has_value: false,
            level: level as i32,
        });
    };
    // SAFETY: malloc of a non-zero size; checked for NULL below.
    let bytes = unsafe { libc::malloc(value.len().max(1)) }.cast::<u8>();
    if bytes.is_null() {
        return None;
    }
    // SAFETY: `bytes` has room for `value.len()` bytes and does not overlap `value`.
    unsafe { ptr::copy_nonoverlapping(value.as_ptr(), bytes, value.len()) };
    Some(mcb_cache_value {
        bytes,
        len: value.len(),
        has_value: true,
        level: level as i32,
    })
}

/// Runs a C loader for `key`.
fn run_loader(
    loader: unsafe extern "C" fn(*mut c_void, *const u8, usize, *mut mcb_cache_loaded) -> i32,
    ctx: *mut c_void,
    key: &[u8],
) -> Result<tiers::Loaded<Vec<u8>>, String> {
    let mut out = mcb_cache_loaded {
        value: ptr::null(),
        value_len: 0,
        ttl_ms: MCB_CACHE_TTL_DEFAULT,
    };
    // SAFETY: the caller of `mcb_cache_get(_bulk)` vouches for the loader and its context;
    // `key` and `out` are valid for the call.
    let kind = unsafe { loader(ctx, key.as_ptr(), key.len(), &mut out) };
    let loaded = match kind {
        MCB_CACHE_LOAD_VALUE => {
            // SAFETY: the loader points `value` at `value_len` readable bytes (contract).
            let value = unsafe { bytes(out.value, out.value_len) }
                .ok_or("loader returned a NULL value with a length")?;
            tiers::Loaded::some(value.to_vec())
        }
        MCB_CACHE_LOAD_NO_VALUE => tiers::Loaded::none(),
        MCB_CACHE_LOAD_ERROR => return Err("loader reported an error".to_owned()),
        other => {
            return Err(format!(
                "loader returned {other}, not a MCB_CACHE_LOAD_* code"
            ))
        }
    };
    Ok(match out.ttl_ms {
        MCB_CACHE_TTL_DEFAULT => loaded,
        ms => match millis(ms) {
            Some(ttl) => loaded.ttl(ttl),
            None => loaded.uncached(),
        },
    })
}

/// `(ctx, loader)` as a Rust closure, `None` when there is no loader.
fn loader_of(
    loader: mcb_cache_loader,
    ctx: *mut c_void,
    key: &[u8],
) -> Option<impl FnOnce() -> Result<tiers::Loaded<Vec<u8>>, String> + Send + '_> {
    // The context pointer crosses threads in bulk gets; the C caller vouches for that.
    struct Ctx(*mut c_void);
    // SAFETY: see above (`mcb_cache_get_bulk`'s contract).
    unsafe impl Send for Ctx {}
    let ctx = Ctx(ctx);
    loader.map(move |loader| {
        move || {
            let ctx = ctx;
            run_loader(loader, ctx.0, key)
        }
    })
}

/// `mcb_cache_get`'s lookup, or the status to return.
///
/// # Safety
/// As for [`mcb_cache_get`].
unsafe fn hit_of(
    cache: *const mcb_cache,
    key: *const u8,
    key_len: usize,
    loader: mcb_cache_loader,
    ctx: *mut c_void,
) -> Result<tiers::Hit<Vec<u8>>, mcb_cache_status> {
    // SAFETY: the caller's contract (see `# Safety`).
    let (Some(cache), Some(key)) = (unsafe { cache.as_ref() }, unsafe { bytes(key, key_len) })
    else {
        return Err(MCB_CACHE_INVALID_ARGUMENT);
    };
    cache
        .0
        .get(key, &CallOptions::default(), loader_of(loader, ctx, key))
        .map_err(|err| status(&err))
}

/// Gets `key`: from this thread's L1, else L2, else `loader` (may be NULL: then a miss is
/// `MCB_CACHE_OK` with level `MCB_CACHE_LEVEL_MISS`). On `MCB_CACHE_OK` fills `out`.
///
/// # Safety
/// `cache` from `mcb_cache_new`; `key` valid for `key_len` bytes; `loader` NULL or a function
/// that honours `mcb_cache_loaded`'s contract with `ctx`; `out` valid for a write.
#[no_mangle]
pub unsafe extern "C" fn mcb_cache_get(
    cache: *const mcb_cache,
    key: *const u8,
    key_len: usize,
    loader: mcb_cache_loader,
    ctx: *mut c_void,
    out: *mut mcb_cache_value,
) -> mcb_cache_status {
    guard(MCB_CACHE_PANIC, || {
        if out.is_null() {
            return MCB_CACHE_INVALID_ARGUMENT;
        }
        // SAFETY: the caller's contract, passed on.
        let hit = match unsafe { hit_of(cache, key, key_len, loader, ctx) } {
            Ok(hit) => hit,
            Err(status) => return status,
        };
        match to_c(hit.value.as_deref().map(Vec::as_slice), hit.level) {
            Some(value) => {
                // SAFETY: non-null and valid for a write (caller's contract).
                unsafe { out.write(value) };
                MCB_CACHE_OK
            }
            None => MCB_CACHE_OUT_OF_MEMORY,
        }
    })
}

/// [`mcb_cache_get`] that copies the value into `buf` (`buf_len` bytes) instead of allocating:
/// on `MCB_CACHE_OK` the value is in `buf[0..out->len]`; when it does not fit, returns
/// `MCB_CACHE_BUFFER_TOO_SMALL` with the length it needs in `out->len` (the value stays cached:
/// call again with a larger buffer).
///
/// # Safety
/// As for `mcb_cache_get`; besides, `buf` NULL (with `buf_len` 0) or valid for `buf_len` writes,
/// and `out` valid for a write.
#[no_mangle]
pub unsafe extern "C" fn mcb_cache_get_into(
    cache: *const mcb_cache,
    key: *const u8,
    key_len: usize,
    loader: mcb_cache_loader,
    ctx: *mut c_void,
    buf: *mut u8,
    buf_len: usize,
    out: *mut mcb_cache_copied,
) -> mcb_cache_status {
    guard(MCB_CACHE_PANIC, || {
        if out.is_null() || (buf.is_null() && buf_len > 0) {
            return MCB_CACHE_INVALID_ARGUMENT;
        }
        // SAFETY: the caller's contract, passed on.
        let hit = match unsafe { hit_of(cache, key, key_len, loader, ctx) } {
            Ok(hit) => hit,
            Err(status) => return status,
        };
        let value = hit.value.as_deref().map_or(&[][..], Vec::as_slice);
        let copied = mcb_cache_copied {
            len: value.len(),
            has_value: hit.value.is_some(),
            level: hit.level as i32,
        };
        let fits = value.len() <= buf_len;
        if fits && !value.is_empty() {
            // SAFETY: `buf` is valid for `buf_len >= value.len()` writes (caller's contract)
            // and cannot overlap the cache's own copy.
            unsafe { ptr::copy_nonoverlapping(value.as_ptr(), buf, value.len()) };
        }
        // SAFETY: non-null and valid for a write (caller's contract).
        unsafe { out.write(copied) };
        if fits {
            MCB_CACHE_OK
        } else {
            MCB_CACHE_BUFFER_TOO_SMALL
        }
    })
}

/// Frees the bytes of a value we filled in and marks it empty; NULL does nothing.
///
/// # Safety
/// `value` is NULL or a value filled by this library and not freed since.
#[no_mangle]
pub unsafe extern "C" fn mcb_cache_value_free(value: *mut mcb_cache_value) {
    guard((), || {
        // SAFETY: NULL or valid (caller's contract).
        if let Some(value) = unsafe { value.as_mut() } {
            // SAFETY: `bytes` is NULL or from `malloc` in `to_c`, not freed since.
            unsafe { libc::free(value.bytes.cast()) };
            value.bytes = ptr::null_mut();
            value.len = 0;
            value.has_value = false;
        }
    });
}

/// Reads `key` from L2 without running a loader or touching L1; with `stale`, an expired
/// entry too. On `MCB_CACHE_OK` fills `out` (`out->present` false when there is none).
///
/// # Safety
/// `cache` from `mcb_cache_new`; `key` valid for `key_len` bytes; `out` valid for a write.
#[no_mangle]
pub unsafe extern "C" fn mcb_cache_peek(
    cache: *const mcb_cache,
    key: *const u8,
    key_len: usize,
    stale: bool,
    out: *mut mcb_cache_peeked,
) -> mcb_cache_status {
    guard(MCB_CACHE_PANIC, || {
        // SAFETY: the caller's contract (see `# Safety`).
        let (Some(cache), Some(key)) = (unsafe { cache.as_ref() }, unsafe { bytes(key, key_len) })
        else {
            return MCB_CACHE_INVALID_ARGUMENT;
        };
        if out.is_null() {
            return MCB_CACHE_INVALID_ARGUMENT;
        }
        let peeked = match cache.0.peek(key, stale) {
            None => mcb_cache_peeked {
                present: false,
                value: to_c(None, Level::Miss).expect("no allocation"),
                remaining_ms: 0,
                stale: false,
            },
            Some(peek) => {
                let Some(value) = to_c(peek.value.as_deref().map(Vec::as_slice), Level::L2) else {
                    return MCB_CACHE_OUT_OF_MEMORY;
                };
                mcb_cache_peeked {
                    present: true,
                    value,
                    remaining_ms: match (peek.remaining, peek.stale_for) {
                        (_, Some(ago)) => -ms(ago),
                        (Some(left), None) => ms(left),
                        (None, None) => -1,
                    },
                    stale: peek.stale,
                }
            }
        };
        // SAFETY: non-null and valid for a write (caller's contract).
        unsafe { out.write(peeked) };
        MCB_CACHE_OK
    })
}

/// Stores `value` (NULL with length 0: "no value", a cached miss) for `ttl_ms`
/// (`MCB_CACHE_TTL_DEFAULT`: the cache's (neg) ttl; 0: forever) in L2 and this thread's L1;
/// other threads' L1 copies are invalid once this returns.
///
/// # Safety
/// `cache` from `mcb_cache_new`; `key` valid for `key_len` bytes; `value` NULL or valid for
/// `value_len` bytes.
#[no_mangle]
pub unsafe extern "C" fn mcb_cache_set(
    cache: *const mcb_cache,
    key: *const u8,
    key_len: usize,
    value: *const u8,
    value_len: usize,
    ttl_ms: i64,
) -> mcb_cache_status {
    guard(MCB_CACHE_PANIC, || {
        // SAFETY: the caller's contract (see `# Safety`).
        let (Some(cache), Some(key)) = (unsafe { cache.as_ref() }, unsafe { bytes(key, key_len) })
        else {
            return MCB_CACHE_INVALID_ARGUMENT;
        };
        let value = if value.is_null() && value_len == 0 {
            None
        } else {
            // SAFETY: the caller's contract.
            match unsafe { bytes(value, value_len) } {
                Some(value) => Some(value.to_vec()),
                None => return MCB_CACHE_INVALID_ARGUMENT,
            }
        };
        let ttl = match ttl_ms {
            MCB_CACHE_TTL_DEFAULT => None,
            ms => match millis(ms) {
                Some(ttl) => Some(ttl),
                None => return MCB_CACHE_INVALID_ARGUMENT,
            },
        };
        let opts = CallOptions {
            ttl,
            neg_ttl: ttl,
            ..CallOptions::default()
        };
        match cache.0.set(key, &opts, value) {
            Ok(()) => MCB_CACHE_OK,
            Err(err) => status(&err),
        }
    })
}

/// Removes `key` from L2 and this thread's L1; other threads' copies are invalid once this
/// returns.
///
/// # Safety
/// `cache` from `mcb_cache_new`; `key` valid for `key_len` bytes.
#[no_mangle]
pub unsafe extern "C" fn mcb_cache_delete(
    cache: *const mcb_cache,
    key: *const u8,
    key_len: usize,
) -> mcb_cache_status {
    guard(MCB_CACHE_PANIC, || {
        // SAFETY: the caller's contract (see `# Safety`).
        let (Some(cache), Some(key)) = (unsafe { cache.as_ref() }, unsafe { bytes(key, key_len) })
        else {
            return MCB_CACHE_INVALID_ARGUMENT;
        };
        cache.0.delete(key);
        MCB_CACHE_OK
    })
}

/// Removes every entry of this cache (and every L1 copy); with `flush_expired`, also frees the
/// expired entries of every cache on the store.
///
/// # Safety
/// `cache` from `mcb_cache_new`.
#[no_mangle]
pub unsafe extern "C" fn mcb_cache_purge(
    cache: *const mcb_cache,
    flush_expired: bool,
) -> mcb_cache_status {
    guard(MCB_CACHE_PANIC, || {
        // SAFETY: the caller's contract.
        let Some(cache) = (unsafe { cache.as_ref() }) else {
            return MCB_CACHE_INVALID_ARGUMENT;
        };
        cache.0.purge(flush_expired);
        MCB_CACHE_OK
    })
}

/// Drops this thread's L1 copies that other threads invalidated (gets never return them
/// anyway; kept for parity with lua-resty-mlcache).
///
/// # Safety
/// `cache` from `mcb_cache_new`.
#[no_mangle]
pub unsafe extern "C" fn mcb_cache_update(cache: *const mcb_cache) -> mcb_cache_status {
    guard(MCB_CACHE_PANIC, || {
        // SAFETY: the caller's contract.
        let Some(cache) = (unsafe { cache.as_ref() }) else {
            return MCB_CACHE_INVALID_ARGUMENT;
        };
        cache.0.update();
        MCB_CACHE_OK
    })
}

/// Gets `n` keys: hits answered at once, misses loaded by their loaders with up to
/// `concurrency` (0: 3, lua-resty-mlcache's default) running at a time, on the calling thread
/// and helper threads this call starts (at most 64 helpers at once in the process: past that,
/// fewer run, so loaders must not wait for one another). On `MCB_CACHE_OK`, `results[i]`
/// answers `ops[i]`; free each OK value with `mcb_cache_value_free`.
///
/// # Safety
/// `cache` from `mcb_cache_new`; `ops` valid for `n` reads and `results` for `n` writes; every
/// op as for `mcb_cache_get`, and each loader and context safe to use from another thread.
#[no_mangle]
pub unsafe extern "C" fn mcb_cache_get_bulk(
    cache: *const mcb_cache,
    ops: *const mcb_cache_bulk_op,
    n: usize,
    concurrency: usize,
    results: *mut mcb_cache_bulk_result,
) -> mcb_cache_status {
    guard(MCB_CACHE_PANIC, || {
        // SAFETY: the caller's contract (see `# Safety`).
        let Some(cache) = (unsafe { cache.as_ref() }) else {
            return MCB_CACHE_INVALID_ARGUMENT;
        };
        if n > 0 && (ops.is_null() || results.is_null()) {
            return MCB_CACHE_INVALID_ARGUMENT;
        }
        let ops: &[mcb_cache_bulk_op] = if n == 0 {
            &[]
        } else {
            // SAFETY: `ops` is non-null (checked above) and valid for `n` reads (contract).
            unsafe { std::slice::from_raw_parts(ops, n) }
        };
        let mut bulk = Vec::with_capacity(n);
        for op in ops {
            // SAFETY: each op's key is valid for its length (caller's contract).
            let Some(key) = (unsafe { bytes(op.key, op.key_len) }) else {
                return MCB_CACHE_INVALID_ARGUMENT;
            };
            bulk.push(BulkOp {
                key,
                opts: CallOptions::default(),
                loader: loader_of(op.loader, op.ctx, key)
                    .map(|l| Box::new(move || l().map_err(Into::into)) as _),
            });
        }
        let concurrency = match concurrency {
            0 => tiers::BULK_CONCURRENCY,
            n => n,
        };
        let answers = match cache.0.get_bulk_with(bulk, concurrency) {
            Ok(answers) => answers,
            Err(err) => return status(&err),
        };
        let mut out: Vec<mcb_cache_bulk_result> = Vec::with_capacity(n);
        for answer in answers {
            out.push(match answer {
                Ok(hit) => match to_c(hit.value.as_deref().map(Vec::as_slice), hit.level) {
                    Some(value) => mcb_cache_bulk_result {
                        status: MCB_CACHE_OK,
                        value,
                    },
                    None => {
                        for mut done in out {
                            // SAFETY: filled by `to_c` just above.
                            unsafe { mcb_cache_value_free(&mut done.value) };
                        }
                        return MCB_CACHE_OUT_OF_MEMORY;
                    }
                },
                Err(err) => mcb_cache_bulk_result {
                    status: status(&err),
                    value: to_c(None, Level::Miss).expect("no allocation"),
                },
            });
        }
        // SAFETY: `results` is valid for `n` writes (caller's contract); `out` has `n` items.
        unsafe { ptr::copy_nonoverlapping(out.as_ptr(), results, n) };
        // The results now own the bytes.
        // SAFETY: the items were moved out bitwise just above; only the buffer is freed.
        unsafe { out.set_len(0) };
        MCB_CACHE_OK
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn level_codes_match_the_core_levels() {
        assert_eq!(MCB_CACHE_LEVEL_MISS, Level::Miss as i32);
        assert_eq!(MCB_CACHE_LEVEL_L1, Level::L1 as i32);
        assert_eq!(MCB_CACHE_LEVEL_L2, Level::L2 as i32);
        assert_eq!(MCB_CACHE_LEVEL_L3, Level::L3 as i32);
        assert_eq!(MCB_CACHE_LEVEL_STALE, Level::Stale as i32);
    }
}
