//! The one way into Rust from C: every exported function runs its body through [`guard`], so a
//! panic becomes an error code instead of unwinding into the host (which is undefined behaviour
//! and would take every tenant down with it).

use std::panic::{self, AssertUnwindSafe};

/// Runs `body`; if it panics, returns `on_panic` instead. A closure rather than a macro, so that
/// rustfmt and the compiler see ordinary code.
pub fn guard<T>(on_panic: T, body: impl FnOnce() -> T) -> T {
    // AssertUnwindSafe: after a panic we only return `on_panic`; state the body touched is
    // either behind our own non-poisoning locks (kept consistent by their users) or abandoned.
    panic::catch_unwind(AssertUnwindSafe(body)).unwrap_or(on_panic)
}

#[cfg(test)]
mod tests {
    use super::guard;

    #[test]
    fn a_panic_becomes_the_fallback_value() {
        assert_eq!(guard(-1, || -> i32 { panic!("boom") }), -1);
        assert_eq!(guard(-1, || 7), 7);
    }
}
