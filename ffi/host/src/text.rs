//! What the ASCII commands (classic and meta) share: reply lines, memcached's error lines and
//! the command-line tokenizer.

use mcb_abi::abi::*;

/// Most tokens a command line may have (keys of a get beyond it are still served).
pub const MAX_TOKENS: usize = 24;

pub const BAD_FORMAT: &str = "CLIENT_ERROR bad command line format";

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

/// A decimal token.
pub fn number<T: std::str::FromStr>(token: &[u8]) -> Option<T> {
    std::str::from_utf8(token).ok()?.parse().ok()
}
