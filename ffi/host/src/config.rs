//! The server's `parse_config`, with memcached's grammar: `key=value` pairs separated by `;`,
//! whitespace around keys and values trimmed, a backslash making the next character literal
//! (so `\;`, `\=`, `\\` and a kept trailing `\ `), keys shorter than 80 bytes and values shorter
//! than 1024. A `config_file=PATH` item reads more pairs from a file, a set per line, skipping
//! lines that start with `#`. Returns 0, -1 on a bad value (parsing stops at once), or 1 when an
//! unknown key was seen (the rest is still parsed). A string value is `strdup`ed with libc so
//! that the engine can `free` it.

use mcb_ffi::abi::*;
use std::ffi::{c_char, c_int, CStr, CString};
use std::io::Write;
use std::os::unix::ffi::OsStrExt;

/// Longest key plus one (memcached's buffer size).
const MAX_KEY: usize = 80;
/// Longest value plus one.
const MAX_VALUE: usize = 1024;
/// How deep `config_file` may nest (a file naming itself would otherwise never end).
const MAX_FILE_DEPTH: usize = 8;

/// Where the parser's complaints go: the caller's `FILE *`, or nowhere when it passed NULL.
struct Complaints(*mut libc::FILE);

impl Complaints {
    fn say(&self, message: std::fmt::Arguments<'_>) {
        if self.0.is_null() {
            return;
        }
        let mut text = Vec::with_capacity(128);
        let _ = text.write_fmt(message);
        text.push(b'\n');
        // SAFETY: a non-NULL stream the caller handed to parse_config, and our own buffer.
        unsafe { libc::fwrite(text.as_ptr().cast(), 1, text.len(), self.0) };
    }
}

/// The caller's table, ending with a NULL key.
struct Table {
    items: *mut config_item,
    len: usize,
}

impl Table {
    /// # Safety
    /// `items` points at a `config_item` array ending with an item whose key is NULL, and each
    /// key is NULL or NUL-terminated.
    unsafe fn new(items: *mut config_item) -> Table {
        let mut len = 0;
        // SAFETY: the caller's contract: the array ends with a NULL key.
        while !unsafe { (*items.add(len)).key }.is_null() {
            len += 1;
        }
        Table { items, len }
    }

    fn find(&mut self, key: &[u8]) -> Option<&mut config_item> {
        (0..self.len)
            // SAFETY: `i < len`, inside the array `new` measured; no other reference to it is
            // alive while the parser runs.
            .map(|i| unsafe { &mut *self.items.add(i) })
            // SAFETY: keys before the terminator are non-NULL and NUL-terminated (`new`).
            .find(|item| unsafe { CStr::from_ptr(item.key) }.to_bytes() == key)
    }
}

/// `SERVER_CORE_API::parse_config`.
///
/// # Safety
/// `text` is NULL or NUL-terminated; `items` is NULL or a table as in [`Table::new`] whose
/// value pointers point at live storage of each item's datatype; `error` is NULL or a stream.
pub unsafe extern "C" fn parse_config(
    text: *const c_char,
    items: *mut config_item,
    error: *mut libc::FILE,
) -> c_int {
    mcb_ffi::boundary::guard(-1, || {
        if text.is_null() || items.is_null() {
            return -1;
        }
        // SAFETY: the caller's contract (NUL-terminated text, a NULL-terminated table).
        let (text, mut table) = unsafe { (CStr::from_ptr(text), Table::new(items)) };
        parse(text.to_bytes(), &mut table, &Complaints(error), 0)
    })
}

/// Reads one token starting at `*pos`: leading whitespace skipped, a backslash makes the next
/// byte literal, stops at an unescaped `stop` (left at `*pos`) or the end, trailing unescaped
/// whitespace dropped. `None` when it would not fit in `limit` bytes.
fn token(text: &[u8], pos: &mut usize, stop: u8, limit: usize) -> Option<Vec<u8>> {
    let mut p = *pos;
    while p < text.len() && text[p].is_ascii_whitespace() {
        p += 1;
    }
    let mut out = Vec::new();
    let mut keep = 0;
    while p < text.len() && text[p] != stop {
        let (byte, escaped) = match (text[p], text.get(p + 1)) {
            (b'\\', Some(&next)) => {
                p += 1;
                (next, true)
            }
            (byte, _) => (byte, false),
        };
        if out.len() + 1 >= limit {
            return None;
        }
        out.push(byte);
        if escaped || !byte.is_ascii_whitespace() {
            keep = out.len();
        }
        p += 1;
    }
    out.truncate(keep);
    *pos = p;
    Some(out)
}

fn parse(text: &[u8], table: &mut Table, complain: &Complaints, depth: usize) -> c_int {
    let mut ret = 0;
    let mut pos = 0;
    loop {
        while pos < text.len() && text[pos].is_ascii_whitespace() {
            pos += 1;
        }
        if pos == text.len() {
            return ret;
        }
        let Some(key) = token(text, &mut pos, b'=', MAX_KEY) else {
            complain.say(format_args!("ERROR: Invalid key, starting at: <{}>", show(&text[pos..])));
            return -1;
        };
        if text.get(pos) != Some(&b'=') {
            complain.say(format_args!("ERROR: Missing '=' after key: <{}>", show(&key)));
            return -1;
        }
        pos += 1;
        let Some(value) = token(text, &mut pos, b';', MAX_VALUE) else {
            complain.say(format_args!("ERROR: Invalid value, starting at: <{}>", show(&text[pos..])));
            return -1;
        };
        if text.get(pos) == Some(&b';') {
            pos += 1;
        }
        let Some(item) = table.find(&key) else {
            complain.say(format_args!("Unsupported key: <{}>", show(&key)));
            ret = 1;
            continue;
        };
        if item.found {
            complain.say(format_args!("WARNING: Found duplicate entry for \"{}\"", show(&key)));
        }
        let datatype = item.datatype;
        if datatype == DT_CONFIGFILE {
            match read_file(&value, table, complain, depth) {
                -1 => return -1,
                0 => {}
                r => ret = r,
            }
            // The file's own items were marked; the config_file item itself is found too.
            if let Some(item) = table.find(&key) {
                item.found = true;
            }
            continue;
        }
        // SAFETY: the caller's contract: the value pointer of each item points at live storage
        // of its datatype.
        if !unsafe { store(item, &value) } {
            complain.say(format_args!(
                "Invalid entry, Key: <{}> Value: <{}>",
                show(&key),
                show(&value)
            ));
            return -1;
        }
        item.found = true;
    }
}

/// Converts `value` to the item's datatype and writes it; false for a bad value (or an unknown
/// datatype).
///
/// # Safety
/// The item's value pointer points at live storage of its datatype.
unsafe fn store(item: &mut config_item, value: &[u8]) -> bool {
    let text = std::str::from_utf8(value).unwrap_or("");
    match item.datatype {
        DT_SIZE => match parse_size(text) {
            // SAFETY: a DT_SIZE item's `dt_size` points at a size_t (the caller's contract).
            Some(v) => unsafe { *item.value.dt_size = v },
            None => return false,
        },
        #[cfg(not(feature = "engine-pu"))]
        DT_SSIZE => match parse_ssize(text) {
            // SAFETY: as above, an ssize_t.
            Some(v) => unsafe { *item.value.dt_ssize = v },
            None => return false,
        },
        DT_FLOAT => match text.parse::<f32>() {
            // SAFETY: as above, a float.
            Ok(v) if !text.is_empty() => unsafe { *item.value.dt_float = v },
            _ => return false,
        },
        DT_BOOL => {
            let v = if ["true", "on"].iter().any(|t| t.eq_ignore_ascii_case(text)) {
                true
            } else if ["false", "off"].iter().any(|t| t.eq_ignore_ascii_case(text)) {
                false
            } else {
                return false;
            };
            // SAFETY: as above, a bool.
            unsafe { *item.value.dt_bool = v };
        }
        DT_STRING => {
            let Ok(owned) = CString::new(value) else {
                return false;
            };
            // SAFETY: a NUL-terminated string; the copy is malloc'ed, for the engine to free.
            let copy = unsafe { libc::strdup(owned.as_ptr()) };
            if copy.is_null() {
                return false;
            }
            // SAFETY: as above, a char *.
            unsafe { *item.value.dt_string = copy };
        }
        _ => return false,
    }
    true
}

/// A size: decimal digits with an optional k/m/g/t suffix (any case; powers of 1024).
fn parse_size(text: &str) -> Option<usize> {
    let (digits, shift) = match text.as_bytes().last()?.to_ascii_lowercase() {
        b'k' => (&text[..text.len() - 1], 10),
        b'm' => (&text[..text.len() - 1], 20),
        b'g' => (&text[..text.len() - 1], 30),
        b't' => (&text[..text.len() - 1], 40),
        _ => (text, 0),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let v: u64 = digits.parse().ok()?;
    let v = v.checked_mul(1u64 << shift)?;
    usize::try_from(v).ok()
}

/// A signed size (v2.5.1's DT_SSIZE): an optional minus sign, then a size.
#[cfg(not(feature = "engine-pu"))]
fn parse_ssize(text: &str) -> Option<libc::ssize_t> {
    match text.strip_prefix('-') {
        Some(rest) => libc::ssize_t::try_from(parse_size(rest)?)
            .ok()
            .map(|v| -v),
        None => libc::ssize_t::try_from(parse_size(text)?).ok(),
    }
}

/// `config_file=PATH`: more pairs from a file, a set per line, `#` lines skipped.
fn read_file(path: &[u8], table: &mut Table, complain: &Complaints, depth: usize) -> c_int {
    if depth >= MAX_FILE_DEPTH {
        complain.say(format_args!("ERROR: config_file nested too deeply at: {}", show(path)));
        return -1;
    }
    let path = std::ffi::OsStr::from_bytes(path);
    let Ok(contents) = std::fs::read(path) else {
        complain.say(format_args!("ERROR: Failed to open file: {}", path.display()));
        return -1;
    };
    let mut ret = 0;
    for line in contents.split(|&b| b == b'\n') {
        if line.first() == Some(&b'#') {
            continue;
        }
        match parse(line, table, complain, depth + 1) {
            -1 => return -1,
            0 => {}
            r => ret = r,
        }
    }
    ret
}

/// Bytes for a message.
fn show(bytes: &[u8]) -> std::borrow::Cow<'_, str> {
    String::from_utf8_lossy(bytes)
}
