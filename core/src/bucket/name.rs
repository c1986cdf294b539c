//! Bucket names: what the wire and the registry accept.

/// Longest bucket name accepted, in bytes: the most a binary-protocol key (its 16-bit length
/// field) can carry, as in the seed, which took any name CREATE's key could hold.
pub const MAX_NAME_LEN: usize = u16::MAX as usize;

/// Why a bucket name was refused.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum NameError {
    /// The name is empty.
    Empty,
    /// The name is longer than [`MAX_NAME_LEN`].
    TooLong,
    /// The name holds a byte other than an ASCII letter, digit, `.`, `%`, `_` or `-`.
    BadChar(u8),
}

impl std::fmt::Display for NameError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NameError::Empty => f.write_str("bucket name is empty"),
            NameError::TooLong => write!(f, "bucket name is longer than {MAX_NAME_LEN} bytes"),
            NameError::BadChar(b) => write!(
                f,
                "bucket name holds byte 0x{b:02x}; allowed are ASCII letters, digits, '.', '%', '_' and '-'"
            ),
        }
    }
}

impl std::error::Error for NameError {}

/// Checks a bucket name. ASCII classes only: the seed's `isalpha` on a signed `char` depended
/// on the locale and was undefined for bytes above 0x7f.
pub fn validate(name: &[u8]) -> Result<&str, NameError> {
    if name.is_empty() {
        return Err(NameError::Empty);
    }
    if name.len() > MAX_NAME_LEN {
        return Err(NameError::TooLong);
    }
    if let Some(&bad) = name
        .iter()
        .find(|&&b| !(b.is_ascii_alphanumeric() || matches!(b, b'.' | b'%' | b'_' | b'-')))
    {
        return Err(NameError::BadChar(bad));
    }
    // Every byte is ASCII, so this cannot fail.
    std::str::from_utf8(name).map_err(|_| NameError::BadChar(0x80))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_the_seed_alphabet() {
        assert_eq!(validate(b"Tenant-1.a%b_c"), Ok("Tenant-1.a%b_c"));
        // Longer than a text-protocol key (250 bytes): the seed took these too.
        assert_eq!(validate(&[b'x'; 251]).map(str::len), Ok(251));
        assert_eq!(
            validate(&[b'x'; MAX_NAME_LEN]).map(str::len),
            Ok(MAX_NAME_LEN)
        );
    }

    #[test]
    fn rejects_empty_long_and_foreign_bytes() {
        assert_eq!(validate(b""), Err(NameError::Empty));
        assert_eq!(validate(&[b'x'; MAX_NAME_LEN + 1]), Err(NameError::TooLong));
        assert_eq!(validate(b"a b"), Err(NameError::BadChar(b' ')));
        assert_eq!(validate(b"a/b"), Err(NameError::BadChar(b'/')));
        assert_eq!(
            validate("caf\u{e9}".as_bytes()),
            Err(NameError::BadChar(0xc3))
        );
        assert_eq!(validate(b"a\0"), Err(NameError::BadChar(0)));
        assert!(NameError::BadChar(0xff).to_string().contains("0xff"));
    }
}
