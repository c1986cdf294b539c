//! memcached's answers, as the store's [`Error`].

use std::fmt;

/// memcached's answers, as errors.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Error {
    /// The key is absent (KEY_ENOENT).
    NotFound,
    /// The key holds another CAS (KEY_EEXISTS).
    Exists,
    /// The operation's condition failed (NOT_STORED).
    NotStored,
    /// Larger than `item_size_max` (E2BIG).
    TooBig,
    /// No room and eviction is off (ENOMEM).
    NoMemory,
    /// incr/decr on a value that is not a decimal number (EINVAL).
    NotNumeric,
    /// An empty key or one longer than [`KEY_MAX`](super::KEY_MAX) (EINVAL).
    BadKey,
    /// A setting out of range.
    InvalidConfig(&'static str),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NotFound => f.write_str("not found"),
            Self::Exists => f.write_str("exists with another CAS"),
            Self::NotStored => f.write_str("not stored"),
            Self::TooBig => f.write_str("too large"),
            Self::NoMemory => f.write_str("out of memory"),
            Self::NotNumeric => f.write_str("non-numeric value"),
            Self::BadKey => f.write_str("invalid key"),
            Self::InvalidConfig(why) => write!(f, "invalid configuration: {why}"),
        }
    }
}

impl std::error::Error for Error {}
