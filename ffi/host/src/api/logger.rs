//! Our logger, the default `EXTENSION_LOGGER`: lines on stderr, filtered by the level that `-v`
//! and the log API set. Its `log` slot is printf-style, which stable Rust cannot define:
//! src/logger.c formats the message and hands the text to [`mcb_host_log_text`].

use mcb_abi::abi::*;
use mcb_abi::boundary::guard;
use std::ffi::{c_char, c_void};
use std::io::Write;
use std::sync::atomic::{AtomicU32, Ordering};

/// The lowest severity written (an `EXTENSION_LOG_LEVEL`).
static LEVEL: AtomicU32 = AtomicU32::new(EXTENSION_LOG_WARNING.0);

/// The level below which nothing is written.
pub fn level() -> EXTENSION_LOG_LEVEL {
    // Relaxed: a filter; a change of level may take effect a message late.
    EXTENSION_LOG_LEVEL(LEVEL.load(Ordering::Relaxed))
}

/// Sets the level (without telling engines: that is the log API's `set_level`).
pub fn set_level(severity: EXTENSION_LOG_LEVEL) {
    // Relaxed: as in `level`.
    LEVEL.store(severity.0, Ordering::Relaxed);
}

/// The log level for a verbosity, as `-v` counts it (and the `verbosity` commands).
pub fn level_of_verbosity(verbosity: u32) -> EXTENSION_LOG_LEVEL {
    match verbosity {
        0 => EXTENSION_LOG_WARNING,
        1 => EXTENSION_LOG_INFO,
        2 => EXTENSION_LOG_DEBUG,
        _ => EXTENSION_LOG_DETAIL,
    }
}

extern "C" {
    /// src/logger.c: formats and calls `mcb_host_log_text`.
    fn mcb_host_log(severity: EXTENSION_LOG_LEVEL, cookie: *const c_void, fmt: *const c_char, ...);
}

unsafe extern "C" fn logger_name() -> *const c_char {
    c"mcb-memcached stderr logger".as_ptr()
}

/// The stderr logger's descriptor.
#[derive(Debug)]
pub struct Descriptor(pub EXTENSION_LOGGER_DESCRIPTOR);

// SAFETY: two function pointers to process-lifetime code, never written.
unsafe impl Sync for Descriptor {}

/// Ours, handed out while no engine registered another logger.
pub static STDERR_LOGGER: Descriptor = Descriptor(EXTENSION_LOGGER_DESCRIPTOR {
    get_name: Some(logger_name),
    log: Some(mcb_host_log),
});

/// Called by src/logger.c with a formatted message.
///
/// # Safety
/// `text` points at `len` readable bytes.
#[no_mangle]
pub unsafe extern "C" fn mcb_host_log_text(
    severity: u32,
    cookie: *const c_void,
    text: *const c_char,
    len: usize,
) {
    guard((), || {
        if text.is_null() {
            return;
        }
        // SAFETY: the caller's contract.
        let bytes = unsafe { std::slice::from_raw_parts(text.cast::<u8>(), len) };
        write(EXTENSION_LOG_LEVEL(severity), cookie, bytes);
    })
}

/// Writes one line to stderr, unless `severity` is below the level.
pub fn write(severity: EXTENSION_LOG_LEVEL, cookie: *const c_void, text: &[u8]) {
    if severity.0 < level().0 {
        return;
    }
    let text = text.strip_suffix(b"\n").unwrap_or(text);
    let mut line = Vec::with_capacity(text.len() + 32);
    let _ = write!(line, "mcb-memcached[{}] ", level_name(severity));
    if !cookie.is_null() {
        let _ = write!(line, "{cookie:p} ");
    }
    line.extend_from_slice(text);
    line.push(b'\n');
    // One write per line, so concurrent lines do not interleave.
    let _ = std::io::stderr().lock().write_all(&line);
}

fn level_name(level: EXTENSION_LOG_LEVEL) -> &'static str {
    match level {
        EXTENSION_LOG_DETAIL => "detail",
        EXTENSION_LOG_DEBUG => "debug",
        EXTENSION_LOG_INFO => "info",
        _ => "warning",
    }
}
