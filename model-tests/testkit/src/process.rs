//! A process's figures as the tests that bound resources measure them: numbers of
//! `/proc/PID/status`, the resident set now and at its peak (which a test lowers before each
//! phase, so that a phase's peak is its own), and a small fixed-seed generator for the load
//! such tests send.

use std::fs;

/// A number from `/proc/PID/status` (`VmRSS` in KiB, `Threads`).
pub fn status(pid: u32, field: &str) -> u64 {
    let text = fs::read_to_string(format!("/proc/{pid}/status")).expect("status");
    text.lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or_else(|| panic!("no {field} in /proc/PID/status"))
}

/// A process's resident set now and at its peak (since it started or [`Memory::reset_peak`]),
/// in bytes.
#[derive(Debug, Clone, Copy)]
pub struct Memory {
    pub rss: u64,
    pub peak: u64,
}

impl Memory {
    pub fn of(pid: u32) -> Memory {
        Memory {
            rss: status(pid, "VmRSS") << 10,
            peak: status(pid, "VmHWM") << 10,
        }
    }

    /// Lowers the peak of `pid` to its resident set now (proc(5), `clear_refs` 5), so that a
    /// phase's peak is its own.
    pub fn reset_peak(pid: u32) {
        fs::write(format!("/proc/{pid}/clear_refs"), "5").expect("reset VmHWM");
    }
}

/// A small deterministic generator (xorshift64), one per thread or connection of a load.
#[derive(Debug, Clone)]
pub struct Rng(pub u64);

impl Rng {
    #[allow(clippy::should_implement_trait)] // not an iterator: it never ends
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}
