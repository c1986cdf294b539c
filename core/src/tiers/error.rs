//! What a cache operation can fail with.

use std::fmt;

/// Why a cache call failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Error {
    /// An option is out of range (zero capacity or tries, zero resurrect ttl...).
    InvalidOption(&'static str),
    /// The loader returned this error; nothing was cached.
    Loader(String),
    /// The loader panicked with this message; nothing was cached.
    LoaderPanicked(String),
    /// Another caller held the key's lock longer than the lock timeout, and no stale value
    /// could stand in.
    LockTimeout,
    /// The L2 store had no room for the value after this many tries.
    L2Full {
        /// Tries made, each evicting a bounded number of entries.
        tries: u32,
    },
    /// The L1 transform rejected the value.
    Transform(String),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::InvalidOption(what) => write!(f, "invalid option: {what}"),
            Self::Loader(err) => write!(f, "loader failed: {err}"),
            Self::LoaderPanicked(msg) => write!(f, "loader panicked: {msg}"),
            Self::LockTimeout => f.write_str("could not acquire the loader lock: timeout"),
            Self::L2Full { tries } => write!(f, "no room in the L2 store after {tries} tries"),
            Self::Transform(err) => write!(f, "L1 transform failed: {err}"),
        }
    }
}

impl std::error::Error for Error {}
