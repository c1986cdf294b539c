//! What a cache operation can fail with, and what it warns about.

use crate::sync::PayloadArc;
use std::fmt;

/// Any error a loader returns (`String` and `&str` convert into it too).
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// A loader's error, shared so that [`Error`] stays `Clone`; its source chain is kept.
#[derive(Clone)]
pub struct LoaderError(PayloadArc<dyn std::error::Error + Send + Sync>);

impl LoaderError {
    /// Wraps a loader's error.
    pub fn new(err: impl Into<BoxError>) -> Self {
        Self(PayloadArc::from(err.into()))
    }

    /// The loader's own error, to downcast.
    pub fn get_ref(&self) -> &(dyn std::error::Error + Send + Sync + 'static) {
        &*self.0
    }
}

impl From<&str> for LoaderError {
    fn from(err: &str) -> Self {
        Self::new(err)
    }
}

impl From<String> for LoaderError {
    fn from(err: String) -> Self {
        Self::new(err)
    }
}

impl fmt::Debug for LoaderError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.0, f)
    }
}

impl fmt::Display for LoaderError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&*self.0, f)
    }
}

/// Equal when they read the same: errors of any type have no other common comparison.
impl PartialEq for LoaderError {
    fn eq(&self, other: &Self) -> bool {
        self.to_string() == other.to_string()
    }
}

impl Eq for LoaderError {}

/// Why a cache call failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Error {
    /// An option is out of range (zero capacity or tries, zero resurrect ttl...).
    InvalidOption(&'static str),
    /// The loader returned this error; nothing was cached.
    Loader(LoaderError),
    /// The loader panicked with this message; nothing was cached and nothing stale was served.
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

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Loader(err) => Some(err.get_ref()),
            _ => None,
        }
    }
}

/// Which L2 a warning is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StoreKind {
    /// The store of values ([`Cache::new`](super::Cache::new)'s `l2`).
    Values,
    /// The separate store of cached misses ([`Options::miss_store`](super::Options::miss_store)).
    Misses,
}

/// Something the cache got past but a user may want to log (the seed logs these).
#[derive(Debug)]
pub enum Warning<'a> {
    /// A loaded (or resurrected) value found no room in an L2 store: it was served and kept in
    /// this thread's L1 only.
    NoRoom {
        /// The key.
        key: &'a [u8],
        /// The full store.
        store: StoreKind,
        /// Tries made.
        tries: u32,
    },
    /// The loader failed: its stale value was served and put back for `resurrect_ttl`.
    Resurrected {
        /// The key.
        key: &'a [u8],
        /// The loader's error.
        error: &'a Error,
    },
    /// Another caller held the key's lock past the lock timeout: the stale value was served.
    StaleOnLockTimeout {
        /// The key.
        key: &'a [u8],
    },
}
