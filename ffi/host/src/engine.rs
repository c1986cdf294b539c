//! The engine, loaded as memcached loads it (`mcb_abi::engine_lib`: `dlopen(RTLD_NOW |
//! RTLD_LOCAL)`, `create_instance(1, get_server_api, &handle)`; then `initialize(config)`), and
//! checked wrappers for the calls the protocols make. The library is never unloaded: memcached
//! does not unload its engine either, and an engine may have registered callbacks with us.
//!
//! Everything an engine hands back is checked before use: `get_item_info`'s counts and
//! pointers against the array we passed and the item's size.

use crate::conn::Cookie;
use crate::packet::Packet;
use crate::server_handle;
use mcb_abi::abi::*;
use mcb_abi::engine_lib::{self, Created};
use mcb_abi::meta_ext::EndTurn;
use std::ffi::{c_char, c_int, c_void, CString};

/// The loaded engine: its handle, a copy of its function table (required slots checked) and
/// its end of turn, if its library has one (ours: `mcb_abi::meta_ext::END_TURN_SYMBOL`).
#[derive(Debug)]
pub struct Engine {
    handle: *mut ENGINE_HANDLE,
    v1: ENGINE_HANDLE_V1,
    end_turn: Option<EndTurn>,
}

// SAFETY: engines are called from every worker thread at once; that is the engine interface's
// contract (memcached does the same). The handle is only passed back to the engine.
unsafe impl Send for Engine {}
// SAFETY: as for `Send`; the copied table is immutable.
unsafe impl Sync for Engine {}

/// Loads and initializes the engine at `path`; the error says what failed and why.
///
/// # Safety
/// As [`mcb_abi::engine_lib::load`]: `path`, if it opens, is an engine library of interface v1
/// whose code is sound to run in this process. Call it once, after [`server_handle::init`] and
/// before any connection is served (it records the engine in the server handle).
pub unsafe fn load(path: &str, config: Option<&str>) -> Result<&'static Engine, String> {
    let config = config
        .map(CString::new)
        .transpose()
        .map_err(|_| "the engine configuration holds a NUL".to_owned())?;
    // SAFETY: `path` is an engine library (this function's contract); our server API is
    // static.
    let Created {
        handle,
        v1,
        end_turn,
    } = unsafe { engine_lib::load(path, Some(server_handle::get_server_api))? };
    // SAFETY: the handle create_instance returned, recorded once, before the listener starts
    // (this function's contract: no worker thread exists yet).
    unsafe { server_handle::set_engine(handle) };
    let engine = Box::leak(Box::new(Engine {
        handle,
        v1,
        end_turn,
    }));
    let init = v1.initialize.expect("checked by engine_lib");
    let config_ptr = config.as_ref().map_or(std::ptr::null(), |c| c.as_ptr());
    // SAFETY: the engine's own handle; NULL or a NUL-terminated config.
    let rc = unsafe { init(handle, config_ptr) };
    if rc != ENGINE_SUCCESS {
        return Err(format!(
            "failed to initialize the engine of \"{path}\": error code {}",
            rc.0
        ));
    }
    Ok(engine)
}

/// Bytes of a key, as the engine's `(pointer, length)`.
fn key_args(key: &[u8]) -> (*const c_void, usize) {
    (key.as_ptr().cast(), key.len())
}

/// How many `iovec`s we offer `get_item_info` (an item's value in up to this many pieces).
pub const IOVS: usize = 8;

/// An item reference from `allocate` or `get`, released on drop.
#[derive(Debug)]
pub struct Item<'e> {
    engine: &'e Engine,
    cookie: Cookie,
    item: *mut item,
    /// From `allocate`: the host fills the value before `store`.
    fresh: bool,
}

impl Drop for Item<'_> {
    fn drop(&mut self) {
        let release = self.engine.v1.release.expect("checked at load");
        // SAFETY: an item reference we hold, released once.
        unsafe { release(self.engine.handle, self.cookie.as_ptr(), self.item) };
    }
}

/// `get_item_info`'s answer, checked: the value's pieces cover exactly `nbytes`. It borrows
/// the item, whose reference keeps the value's memory alive.
#[derive(Debug)]
pub struct Info<'i> {
    raw: item_info_iov<{ IOVS - 1 }>,
    _item: std::marker::PhantomData<&'i ()>,
}

impl Info<'_> {
    pub fn cas(&self) -> u64 {
        self.raw.info.cas
    }
    /// The flags as stored (in network byte order, as memcached stores them).
    pub fn flags(&self) -> u32 {
        self.raw.info.flags
    }
    pub fn nbytes(&self) -> usize {
        self.raw.info.nbytes as usize
    }
    /// When the item expires, in server time (0: never).
    pub fn exptime(&self) -> rel_time_t {
        self.raw.info.exptime
    }
    fn pieces(&self) -> impl Iterator<Item = &iovec> + Clone {
        let n = usize::from(self.raw.info.nvalue);
        std::iter::once(&self.raw.info.value[0])
            .chain(self.raw.more.iter())
            .take(n)
    }

    /// The value, in the engine's pieces.
    pub fn value(&self) -> impl Iterator<Item = &[u8]> + Clone {
        self.pieces().map(piece)
    }
}

/// One checked piece of an item's value.
fn piece(p: &iovec) -> &[u8] {
    if p.iov_len == 0 {
        return &[];
    }
    // SAFETY: `Item::info` checked that a non-empty piece has a base; the engine's item
    // (borrowed, through an `Info` or a `Value`, as long as `p` is) keeps it readable until it
    // is released.
    unsafe { std::slice::from_raw_parts(p.iov_base.cast::<u8>(), p.iov_len) }
}

impl Item<'_> {
    /// The item's info; `None` when the engine failed or answered something inconsistent.
    pub fn info(&self) -> Option<Info<'_>> {
        let empty = iovec {
            iov_base: std::ptr::null_mut(),
            iov_len: 0,
        };
        let mut raw = item_info_iov::<{ IOVS - 1 }> {
            info: item_info {
                cas: 0,
                exptime: 0,
                nbytes: 0,
                flags: 0,
                clsid: 0,
                nkey: 0,
                nvalue: IOVS as u16,
                key: std::ptr::null(),
                value: [empty],
            },
            more: [empty; IOVS - 1],
        };
        let f = self.engine.v1.get_item_info.expect("checked at load");
        // SAFETY: our item; an item_info followed by IOVS - 1 more iovecs, as nvalue says.
        let ok = unsafe {
            f(
                self.engine.handle,
                self.cookie.as_ptr(),
                self.item,
                &mut raw.info,
            )
        };
        let n = usize::from(raw.info.nvalue);
        if !ok || n > IOVS {
            return None;
        }
        let info = Info {
            raw,
            _item: std::marker::PhantomData,
        };
        let mut total = 0usize;
        for piece in info.pieces() {
            if piece.iov_base.is_null() && piece.iov_len > 0 {
                return None;
            }
            total = total.checked_add(piece.iov_len)?;
        }
        (total == info.nbytes()).then_some(info)
    }
}

/// An item held for its value: the reference and its checked info together, so that a reply
/// can be written out from the engine's memory as the socket accepts it (the item is released
/// when the last byte is out).
#[derive(Debug)]
pub struct Value<'e> {
    raw: item_info_iov<{ IOVS - 1 }>,
    _item: Item<'e>,
}

impl<'e> Value<'e> {
    /// The item's value; `None` when `get_item_info` fails or answers something inconsistent.
    pub fn of(item: Item<'e>) -> Option<Value<'e>> {
        let raw = item.info()?.raw;
        Some(Value { raw, _item: item })
    }

    /// The value's info (flags, CAS, size).
    pub fn info(&self) -> Info<'_> {
        Info {
            raw: self.raw,
            _item: std::marker::PhantomData,
        }
    }

    /// The value's size in bytes.
    pub fn len(&self) -> usize {
        self.raw.info.nbytes as usize
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The value, in the engine's pieces, borrowing the held item.
    pub fn value(&self) -> impl Iterator<Item = &[u8]> + Clone {
        let n = usize::from(self.raw.info.nvalue);
        std::iter::once(&self.raw.info.value[0])
            .chain(self.raw.more.iter())
            .take(n)
            .map(piece)
    }
}

/// A freshly allocated item, for the host to fill before `store`: the item and its value's
/// pieces, looked up once (`get_item_info`), so that a value arriving in many reads costs one
/// engine call, not one per read. An allocated item's value is the host's to write until it is
/// stored (the interface's contract).
#[derive(Debug)]
pub struct Blank<'e> {
    raw: item_info_iov<{ IOVS - 1 }>,
    item: Item<'e>,
}

impl<'e> Blank<'e> {
    /// `item`'s value to fill, of `size` bytes (what was allocated); `None` for an item from
    /// `get` (stored items are the engine's, read-only) or when `get_item_info` fails or
    /// answers something inconsistent (another size included).
    pub fn of(item: Item<'e>, size: usize) -> Option<Blank<'e>> {
        if !item.fresh {
            return None;
        }
        let info = item.info()?;
        if info.nbytes() != size {
            return None;
        }
        let raw = info.raw;
        Some(Blank { raw, item })
    }

    /// The item, to stamp and store.
    pub fn item(&self) -> &Item<'e> {
        &self.item
    }

    /// The value's size in bytes.
    pub fn len(&self) -> usize {
        self.raw.info.nbytes as usize
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The value as filled so far, in the engine's pieces.
    pub fn value(&self) -> impl Iterator<Item = &[u8]> + Clone {
        self.pieces().map(piece)
    }

    fn pieces(&self) -> impl Iterator<Item = &iovec> + Clone {
        let n = usize::from(self.raw.info.nvalue);
        std::iter::once(&self.raw.info.value[0])
            .chain(self.raw.more.iter())
            .take(n)
    }

    /// The value's bytes from byte `at` on, as the writable pieces they lie in. `&mut self`
    /// makes them the only view of the value while they live: no [`Blank::value`] and no
    /// second `unfilled` meanwhile.
    ///
    /// ```compile_fail,E0499
    /// fn two_writers(blank: &mut mcb_host::engine::Blank<'_>) {
    ///     let a = blank.unfilled(0);
    ///     let b = blank.unfilled(0); // a second `&mut` to the same bytes: refused
    ///     drop((a, b));
    /// }
    /// ```
    /// ```compile_fail,E0502
    /// fn read_while_writing(blank: &mut mcb_host::engine::Blank<'_>) {
    ///     let a = blank.unfilled(0);
    ///     let b = blank.value(); // a `&` view while the `&mut` lives: refused
    ///     drop((a, b));
    /// }
    /// ```
    /// One after the other is fine:
    /// ```
    /// fn one_at_a_time(blank: &mut mcb_host::engine::Blank<'_>) {
    ///     drop(blank.unfilled(0));
    ///     drop(blank.unfilled(1));
    ///     drop(blank.value());
    /// }
    /// ```
    pub fn unfilled(&mut self, at: usize) -> impl Iterator<Item = &mut [u8]> + '_ {
        let n = usize::from(self.raw.info.nvalue);
        let mut pieces = [self.raw.info.value[0]; IOVS];
        pieces[1..].copy_from_slice(&self.raw.more);
        let mut skip = at;
        pieces
            .into_iter()
            .take(n)
            .filter_map(move |p| {
                let start = skip.min(p.iov_len);
                skip -= start;
                (start < p.iov_len).then_some((p, start))
            })
            .map(|(p, start)| {
                // SAFETY: `Blank::of` checked (through `Item::info`) that a non-empty piece has a
                // base and that the pieces add up to the item's size; a fresh item's value is
                // the host's to write until it is stored and stays alive while we hold the
                // item; the pieces do not overlap, and `&mut self` keeps any other view of
                // them from existing meanwhile.
                let whole =
                    unsafe { std::slice::from_raw_parts_mut(p.iov_base.cast::<u8>(), p.iov_len) };
                &mut whole[start..]
            })
    }

    /// Copies `input` into the value from byte `at` on, as far as either reaches; how many
    /// bytes it copied.
    pub fn write_at(&mut self, at: usize, mut input: &[u8]) -> usize {
        let mut copied = 0;
        for piece in self.unfilled(at) {
            if input.is_empty() {
                break;
            }
            let n = piece.len().min(input.len());
            piece[..n].copy_from_slice(&input[..n]);
            input = &input[n..];
            copied += n;
        }
        copied
    }
}

/// The store operations, as the protocols name them.
pub type StoreOp = ENGINE_STORE_OPERATION;

/// What `arithmetic` was asked.
#[derive(Debug)]
pub struct Arith {
    pub incr: bool,
    pub create: bool,
    pub delta: u64,
    pub initial: u64,
    /// The created item's expiration time as the client sent it, not converted: memcached
    /// hands `arithmetic` the request's field as it is and the engine converts it (its
    /// default engine calls `realtime`), unlike `allocate`'s, which the host converts.
    pub exptime: u32,
}

impl Engine {
    pub fn allocate(
        &self,
        cookie: &Cookie,
        key: &[u8],
        nbytes: usize,
        flags: u32,
        exptime: rel_time_t,
    ) -> Result<Item<'_>, ENGINE_ERROR_CODE> {
        let f = self.v1.allocate.expect("checked at load");
        let mut it: *mut item = std::ptr::null_mut();
        let (k, nk) = key_args(key);
        // SAFETY: live out-parameter and key; the flags' bits pass through as C's int.
        let rc = unsafe {
            f(
                self.handle,
                cookie.as_ptr(),
                &mut it,
                k,
                nk,
                nbytes,
                flags as c_int,
                exptime,
            )
        };
        self.item(rc, cookie, it, true)
    }

    pub fn get(
        &self,
        cookie: &Cookie,
        key: &[u8],
        vbucket: u16,
    ) -> Result<Item<'_>, ENGINE_ERROR_CODE> {
        let f = self.v1.get.expect("checked at load");
        let mut it: *mut item = std::ptr::null_mut();
        let Ok(nkey) = c_int::try_from(key.len()) else {
            return Err(ENGINE_EINVAL);
        };
        // SAFETY: live out-parameter and key.
        let rc = unsafe {
            f(
                self.handle,
                cookie.as_ptr(),
                &mut it,
                key.as_ptr().cast(),
                nkey,
                vbucket,
            )
        };
        self.item(rc, cookie, it, false)
    }

    fn item(
        &self,
        rc: ENGINE_ERROR_CODE,
        cookie: &Cookie,
        it: *mut item,
        fresh: bool,
    ) -> Result<Item<'_>, ENGINE_ERROR_CODE> {
        match (rc, it.is_null()) {
            (ENGINE_SUCCESS, false) => Ok(Item {
                engine: self,
                // The item keeps its connection (so its cookie) alive until it is released.
                cookie: cookie.clone(),
                item: it,
                fresh,
            }),
            (ENGINE_SUCCESS, true) => Err(ENGINE_FAILED),
            (rc, _) => Err(rc),
        }
    }

    /// Ends this worker's turn, for an engine that serves gets by turns (see
    /// `mcb_abi::meta_ext::END_TURN_SYMBOL`): call it before the worker waits for events.
    pub fn end_turn(&self) {
        if let Some(end_turn) = self.end_turn {
            // SAFETY: a worker releases each item it got on its own thread (it owns the
            // connections that hold them), and the engine is never destroyed while workers
            // run (`destroy` comes after they have stopped).
            unsafe { end_turn() }
        }
    }

    pub fn item_set_cas(&self, item: &Item<'_>, cas: u64) {
        let f = self.v1.item_set_cas.expect("checked at load");
        // SAFETY: an item reference we hold.
        unsafe { f(self.handle, item.cookie.as_ptr(), item.item, cas) }
    }

    pub fn store(
        &self,
        item: &Item<'_>,
        cas: &mut u64,
        op: StoreOp,
        vbucket: u16,
    ) -> ENGINE_ERROR_CODE {
        let f = self.v1.store.expect("checked at load");
        // SAFETY: an item reference we hold; a live CAS in/out.
        unsafe {
            f(
                self.handle,
                item.cookie.as_ptr(),
                item.item,
                cas,
                op,
                vbucket,
            )
        }
    }

    pub fn remove(
        &self,
        cookie: &Cookie,
        key: &[u8],
        cas: &mut u64,
        vbucket: u16,
    ) -> ENGINE_ERROR_CODE {
        let f = self.v1.remove.expect("checked at load");
        let (k, nk) = key_args(key);
        // SAFETY: a live key and CAS in/out (v2.5.1: by pointer).
        #[cfg(not(feature = "engine-pu"))]
        let rc = unsafe { f(self.handle, cookie.as_ptr(), k, nk, cas, vbucket) };
        // SAFETY: a live key (engine-pu: the CAS by value).
        #[cfg(feature = "engine-pu")]
        let rc = unsafe { f(self.handle, cookie.as_ptr(), k, nk, *cas, vbucket) };
        rc
    }

    pub fn arithmetic(
        &self,
        cookie: &Cookie,
        key: &[u8],
        a: &Arith,
        cas: &mut u64,
        result: &mut u64,
        vbucket: u16,
    ) -> ENGINE_ERROR_CODE {
        let f = self.v1.arithmetic.expect("checked at load");
        let Ok(nkey) = c_int::try_from(key.len()) else {
            return ENGINE_EINVAL;
        };
        // SAFETY: a live key and out-parameters.
        unsafe {
            f(
                self.handle,
                cookie.as_ptr(),
                key.as_ptr().cast(),
                nkey,
                a.incr,
                a.create,
                a.delta,
                a.initial,
                a.exptime,
                cas,
                result,
                vbucket,
            )
        }
    }

    pub fn flush(&self, cookie: &Cookie, when: libc::time_t) -> ENGINE_ERROR_CODE {
        let f = self.v1.flush.expect("checked at load");
        // SAFETY: the engine's handle and our cookie.
        unsafe { f(self.handle, cookie.as_ptr(), when) }
    }

    /// Statistics of `group` (empty: the default group), through [`crate::conn::add_stat`].
    pub fn get_stats(&self, cookie: &Cookie, group: &[u8]) -> ENGINE_ERROR_CODE {
        let f = self.v1.get_stats.expect("checked at load");
        let Ok(n) = c_int::try_from(group.len()) else {
            return ENGINE_EINVAL;
        };
        let key = if group.is_empty() {
            std::ptr::null()
        } else {
            group.as_ptr().cast::<c_char>()
        };
        // SAFETY: a live key (or NULL for the default group) and our callback.
        unsafe {
            f(
                self.handle,
                cookie.as_ptr(),
                key,
                n,
                Some(crate::conn::add_stat),
            )
        }
    }

    pub fn reset_stats(&self, cookie: &Cookie) {
        let f = self.v1.reset_stats.expect("checked at load");
        // SAFETY: the engine's handle and our cookie.
        unsafe { f(self.handle, cookie.as_ptr()) }
    }

    /// `destroy`: the engine's last call, once every worker has stopped.
    pub fn destroy(&self) {
        let f = self.v1.destroy.expect("checked by engine_lib");
        // SAFETY: the engine's own handle, destroyed once; no connection calls it any more.
        unsafe { f(self.handle, false) }
    }

    /// Any other binary command, answering through [`crate::conn::add_response`].
    pub fn unknown_command(&self, cookie: &Cookie, packet: &mut Packet) -> ENGINE_ERROR_CODE {
        let f = self.v1.unknown_command.expect("checked at load");
        // SAFETY: a `Packet` is a whole request (header, then `bodylen` bytes), 8-byte aligned
        // and writable, live across the call (borrowed mutably for it).
        unsafe {
            f(
                self.handle,
                cookie.as_ptr(),
                packet.as_header(),
                Some(crate::conn::add_response),
            )
        }
    }
}
