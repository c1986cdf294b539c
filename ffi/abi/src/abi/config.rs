//! `config_parser.h`: the table a caller hands the server's `parse_config`.
//!
//! Grammar (memcached's `parse_config`): `key=value` pairs separated by `;`, whitespace around
//! keys and values trimmed, a backslash escapes the next character, keys at most 79 bytes and
//! values at most 1023. `config_file=PATH` (a [`DT_CONFIGFILE`] item) reads more pairs from a
//! file, one or more per line, skipping lines that start with `#`. Returns 0 on success, -1 on
//! a bad value (parsing stops), 1 when an unknown key was seen (parsing continues). A
//! [`DT_STRING`] value is `strdup`ed: the caller frees it.

use core::ffi::{c_char, CStr};

/// The type of a [`config_item`]'s value (`enum config_datatype`).
///
/// v2.5.1 has `DT_SSIZE` at 1, engine-pu does not: every later enumerator differs between the
/// two, so a table built for one server misreads on the other. v2.5.1's own `parse_config`
/// has no case for `DT_SSIZE` and aborts the process on it: never use it there.
#[repr(transparent)]
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct config_datatype(pub u32);

/// A `size_t`, with an optional k/m/g/t suffix (powers of 1024).
pub const DT_SIZE: config_datatype = config_datatype(0);
/// A `ssize_t` (v2.5.1 only, and unparsable there: see [`config_datatype`]).
#[cfg(not(feature = "engine-pu"))]
pub const DT_SSIZE: config_datatype = config_datatype(1);
/// A `float`.
#[cfg(not(feature = "engine-pu"))]
pub const DT_FLOAT: config_datatype = config_datatype(2);
/// A `bool`: true/on or false/off, any case.
#[cfg(not(feature = "engine-pu"))]
pub const DT_BOOL: config_datatype = config_datatype(3);
/// A `char *`, `strdup`ed.
#[cfg(not(feature = "engine-pu"))]
pub const DT_STRING: config_datatype = config_datatype(4);
/// A file of more `key=value` pairs.
#[cfg(not(feature = "engine-pu"))]
pub const DT_CONFIGFILE: config_datatype = config_datatype(5);
/// A `float`.
#[cfg(feature = "engine-pu")]
pub const DT_FLOAT: config_datatype = config_datatype(1);
/// A `bool`: true/on or false/off, any case.
#[cfg(feature = "engine-pu")]
pub const DT_BOOL: config_datatype = config_datatype(2);
/// A `char *`, `strdup`ed.
#[cfg(feature = "engine-pu")]
pub const DT_STRING: config_datatype = config_datatype(3);
/// A file of more `key=value` pairs.
#[cfg(feature = "engine-pu")]
pub const DT_CONFIGFILE: config_datatype = config_datatype(4);

/// Where `parse_config` stores a value (`union config_value`): one pointer, chosen by the
/// item's datatype.
#[repr(C)]
#[derive(Clone, Copy)]
pub union config_value {
    pub dt_size: *mut usize,
    #[cfg(not(feature = "engine-pu"))]
    pub dt_ssize: *mut libc::ssize_t,
    pub dt_float: *mut f32,
    pub dt_bool: *mut bool,
    pub dt_string: *mut *mut c_char,
}

impl core::fmt::Debug for config_value {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        // SAFETY: every member is a raw pointer of the same size; reading one as `dt_size` only
        // copies the pointer bits, which is valid for any member that was written.
        let bits = unsafe { self.dt_size };
        f.debug_tuple("config_value").field(&bits).finish()
    }
}

/// One entry of a `parse_config` table (`struct config_item`); the table ends with an entry
/// whose `key` is NULL. `found` is set when the key was seen.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct config_item {
    pub key: *const c_char,
    pub datatype: config_datatype,
    pub value: config_value,
    pub found: bool,
}

impl config_item {
    /// An entry for `key`; `value` points at storage of `datatype`'s type.
    pub fn new(key: &'static CStr, datatype: config_datatype, value: config_value) -> Self {
        Self {
            key: key.as_ptr(),
            datatype,
            value,
            found: false,
        }
    }

    /// The entry that ends a table: a NULL key.
    pub const END: config_item = config_item {
        key: core::ptr::null(),
        datatype: DT_SIZE,
        value: config_value {
            dt_size: core::ptr::null_mut(),
        },
        found: false,
    };
}
