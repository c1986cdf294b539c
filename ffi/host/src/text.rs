//! What the ASCII commands (classic and meta) share: reply lines, memcached's error lines, the
//! command-line tokenizer, numbers as memcached's C reads them, base64 keys, and expiration
//! times as the binary packets sent to the engine carry them.

#![deny(unsafe_code)]

use crate::api::server_core::REALTIME_MAXDELTA;
use mcb_abi::abi::*;

/// Most tokens a command line may have (keys of a get beyond it are still served).
pub const MAX_TOKENS: usize = 24;

pub const BAD_FORMAT: &str = "CLIENT_ERROR bad command line format";
/// The answer to a command or flag the engine cannot honour (memcached's own text).
pub const UNSUPPORTED: &str = "CLIENT_ERROR flag not supported by this engine";

/// Appends `line` and its `\r\n`.
pub fn reply(out: &mut Vec<u8>, line: &str) {
    out.extend_from_slice(line.as_bytes());
    out.extend_from_slice(b"\r\n");
}

/// memcached's line for an engine error.
pub fn error_line(rc: ENGINE_ERROR_CODE) -> &'static str {
    match rc {
        ENGINE_ENOMEM => "SERVER_ERROR out of memory",
        ENGINE_TMPFAIL => "SERVER_ERROR temporary failure",
        ENGINE_ENOTSUP => "SERVER_ERROR not supported",
        ENGINE_NOT_MY_VBUCKET => "SERVER_ERROR not my vbucket",
        ENGINE_E2BIG => "SERVER_ERROR object too large for cache",
        ENGINE_EACCESS => "SERVER_ERROR access denied",
        ENGINE_EINVAL => "CLIENT_ERROR invalid arguments",
        _ => "SERVER_ERROR unhandled error",
    }
}

/// A client's expiration time as the 32-bit field of a binary packet (TOUCH, GAT, our
/// opcodes): a negative time (already past) becomes a Unix time before the server started.
pub fn wire_exptime(exptime: libc::time_t) -> u32 {
    if exptime < 0 {
        (REALTIME_MAXDELTA + 1) as u32
    } else {
        u32::try_from(exptime).unwrap_or(u32::MAX)
    }
}

/// Splits a command line at spaces.
pub fn tokenize(line: &[u8]) -> ([&[u8]; MAX_TOKENS], usize) {
    let mut tokens: [&[u8]; MAX_TOKENS] = [&[]; MAX_TOKENS];
    let mut n = 0;
    for t in line.split(|&b| b == b' ').filter(|t| !t.is_empty()) {
        if n == MAX_TOKENS {
            break;
        }
        tokens[n] = t;
        n += 1;
    }
    (tokens, n)
}

// memcached reads every command's numbers with C's `strtol` family (its `safe_strto*`):
// leading white space and a sign are allowed, what follows the digits must be nothing or
// white space, and the value is then stored in a variable of the field's width. So a 32-bit
// field reads 2^32 as 0 and 2^31 as -2^31. The three readers below give the same numbers, so
// that edge values mean here what they mean to memcached (the transcript in `tests/meta.rs`
// checks them against it).

/// C's `isspace`.
fn c_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
}

/// A token as `strto*` reads it: whether it had a `-`, and its digits; `None` without digits
/// or with something other than white space after them.
fn c_digits(token: &[u8]) -> Option<(bool, &[u8])> {
    let start = token
        .iter()
        .position(|&b| !c_space(b))
        .unwrap_or(token.len());
    let t = &token[start..];
    let (negative, t) = match t.first() {
        Some(b'-') => (true, &t[1..]),
        Some(b'+') => (false, &t[1..]),
        _ => (false, t),
    };
    let end = t
        .iter()
        .position(|b| !b.is_ascii_digit())
        .unwrap_or(t.len());
    let rest_ok = t.get(end).is_none_or(|&b| c_space(b));
    (end > 0 && rest_ok).then_some((negative, &t[..end]))
}

/// memcached's `safe_strtoull`: an unsigned 64-bit decimal; `strtoull` negates a `-` number
/// modulo 2^64, and memcached then refuses it only if it reads as negative (so `-0` is 0, `-1`
/// is refused). Past 2^64 - 1: refused.
pub fn c_u64(token: &[u8]) -> Option<u64> {
    let (negative, digits) = c_digits(token)?;
    let magnitude: u64 = std::str::from_utf8(digits).ok()?.parse().ok()?;
    let value = if negative {
        magnitude.wrapping_neg()
    } else {
        magnitude
    };
    (!(negative && (value as i64) < 0)).then_some(value)
}

/// memcached's `safe_strtoul` into a 32-bit field (flags): [`c_u64`] kept in 32 bits.
pub fn c_u32(token: &[u8]) -> Option<u32> {
    // Truncation on purpose: C's assignment to the 32-bit field.
    c_u64(token).map(|v| v as u32)
}

/// memcached's `safe_strtol` into a 32-bit field (exptime, a length): a signed 64-bit decimal
/// kept in 32 bits.
pub fn c_i32(token: &[u8]) -> Option<i32> {
    let (negative, digits) = c_digits(token)?;
    let text = std::str::from_utf8(digits).ok()?;
    let value: i64 = if negative {
        format!("-{text}").parse().ok()?
    } else {
        text.parse().ok()?
    };
    // Truncation on purpose: C's assignment to the 32-bit field.
    Some(value as i32)
}

/// Standard base64 (with padding), as memcached's `b` flag reads keys.
pub fn decode_base64(text: &[u8]) -> Option<Vec<u8>> {
    fn sextet(c: u8) -> Option<u32> {
        Some(u32::from(match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        }))
    }
    if text.is_empty() || text.len() % 4 != 0 {
        return None;
    }
    let mut out = Vec::with_capacity(text.len() / 4 * 3);
    let last = text.len() / 4 - 1;
    for (i, quad) in text.chunks(4).enumerate() {
        let pad = quad.iter().rev().take_while(|&&c| c == b'=').count();
        if pad > 2 || (pad > 0 && i != last) {
            return None;
        }
        let mut bits = 0;
        for &c in &quad[..4 - pad] {
            bits = bits << 6 | sextet(c)?;
        }
        bits <<= 6 * pad as u32;
        out.extend_from_slice(&bits.to_be_bytes()[1..4 - pad]);
    }
    Some(out)
}

/// Appends `bytes` in standard base64 (with padding), as memcached's meta commands answer a
/// key that came in base64.
pub fn push_base64(out: &mut Vec<u8>, bytes: &[u8]) {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    for chunk in bytes.chunks(3) {
        let mut word = [0u8; 4];
        word[1..=chunk.len()].copy_from_slice(chunk);
        let bits = u32::from_be_bytes(word);
        for i in 0..4 {
            out.push(if i <= chunk.len() {
                ALPHABET[(bits >> (18 - 6 * i) & 63) as usize]
            } else {
                b'='
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{c_i32, c_u32, c_u64, decode_base64, push_base64};

    #[test]
    fn numbers_read_as_memcached_reads_them() {
        assert_eq!(c_u32(b"4294967295"), Some(u32::MAX));
        assert_eq!(c_u32(b"4294967296"), Some(0));
        assert_eq!(c_u32(b"18446744073709551615"), Some(u32::MAX));
        assert_eq!(c_u64(b"18446744073709551616"), None);
        assert_eq!(c_u64(b"-1"), None);
        assert_eq!(c_u64(b"-0"), Some(0));
        assert_eq!(c_u64(b"-18446744073709551615"), Some(1));
        assert_eq!(c_u64(b"+7"), Some(7));
        assert_eq!(c_u64(b"007"), Some(7));
        assert_eq!(c_i32(b"2147483648"), Some(i32::MIN));
        assert_eq!(c_i32(b"4294967297"), Some(1));
        assert_eq!(c_i32(b"-1"), Some(-1));
        assert_eq!(c_i32(b"9223372036854775808"), None);
        assert_eq!(c_i32(b"-9223372036854775808"), Some(0));
        for bad in [&b""[..], b"x", b"1x", b"1.5", b"-", b"+", b" "] {
            assert_eq!((c_u64(bad), c_i32(bad)), (None, None), "{bad:?}");
        }
        assert_eq!(c_i32(b"5\t"), Some(5));
    }

    #[test]
    fn base64_keys_decode_and_encode() {
        assert_eq!(decode_base64(b"Zm9v").as_deref(), Some(&b"foo"[..]));
        assert_eq!(decode_base64(b"Zm9vYg==").as_deref(), Some(&b"foob"[..]));
        assert_eq!(decode_base64(b"Zm9vYmE=").as_deref(), Some(&b"fooba"[..]));
        assert_eq!(decode_base64(b"AP8="), Some(vec![0, 255]));
        for bad in [&b"foo"[..], b"", b"Zm9!", b"Z===", b"Zg==Zm9v"] {
            assert_eq!(decode_base64(bad), None, "{bad:?}");
        }
        for key in [&b"foo"[..], b"foob", b"fooba", b"\0\xff", b"k"] {
            let mut text = Vec::new();
            push_base64(&mut text, key);
            assert_eq!(decode_base64(&text).as_deref(), Some(key), "{text:?}");
        }
        let mut text = Vec::new();
        push_base64(&mut text, b"foob");
        assert_eq!(text, b"Zm9vYg==");
    }
}
