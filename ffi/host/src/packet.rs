//! A binary request handed to an engine whole (`unknown_command`): built from its parts or
//! copied from the wire, in a buffer aligned for `protocol_binary_request_header` (which holds a
//! `u64`; a spot in the read buffer is not so aligned), and whose header's lengths always
//! describe exactly the bytes that follow it. That invariant is what the engine call needs, so
//! [`crate::engine::Engine::unknown_command`] takes a `&mut Packet` and is safe to call: the
//! protocols hand engines packets without `unsafe`. One packet per connection is reused.

use crate::codec::HEADER;
use mcb_abi::abi::*;

/// A whole binary request in an 8-byte-aligned buffer.
#[derive(Debug, Default)]
pub struct Packet {
    words: Vec<u64>,
    /// The request's length in bytes (header and body).
    len: usize,
}

/// Parts that a binary header cannot describe (a key over 65,535 bytes, extras over 255, a
/// body over 4 GiB), or wire bytes that are not one whole request.
#[derive(Debug, PartialEq, Eq, Clone, Copy)]
pub struct TooLong;

impl Packet {
    /// Makes the packet a request of `opcode` with these parts (opaque and CAS zero, raw
    /// bytes), replacing what it held.
    pub fn request(
        &mut self,
        opcode: u8,
        extras: &[u8],
        key: &[u8],
        value: &[u8],
    ) -> Result<&mut Packet, TooLong> {
        let keylen = u16::try_from(key.len()).map_err(|_| TooLong)?.to_be_bytes();
        let extlen = u8::try_from(extras.len()).map_err(|_| TooLong)?;
        let body = extras.len() + key.len() + value.len();
        let bodylen = u32::try_from(body).map_err(|_| TooLong)?.to_be_bytes();
        #[rustfmt::skip]
        let header = [
            PROTOCOL_BINARY_REQ, opcode, keylen[0], keylen[1],
            extlen, PROTOCOL_BINARY_RAW_BYTES, 0, 0,
            bodylen[0], bodylen[1], bodylen[2], bodylen[3],
            0, 0, 0, 0, // opaque
            0, 0, 0, 0, 0, 0, 0, 0, // cas
        ];
        self.fill(&[&header, extras, key, value]);
        Ok(self)
    }

    /// Makes the packet a copy of `wire`, a whole request as a client sent it: its header's
    /// body length is exactly the bytes after the header, and its extras and key fit the body.
    pub fn copy_of(&mut self, wire: &[u8]) -> Result<&mut Packet, TooLong> {
        let header = wire.get(..HEADER).ok_or(TooLong)?;
        let keylen = usize::from(u16::from_be_bytes([header[2], header[3]]));
        let extlen = usize::from(header[4]);
        let bodylen = u32::from_be_bytes([header[8], header[9], header[10], header[11]]) as usize;
        if HEADER + bodylen != wire.len() || extlen + keylen > bodylen {
            return Err(TooLong);
        }
        self.fill(&[wire]);
        Ok(self)
    }

    /// The request's opcode.
    pub fn opcode(&self) -> u8 {
        self.words.first().map_or(0, |w| w.to_ne_bytes()[1])
    }

    /// The request as the engine call takes it: valid (a whole request, aligned, writable) for
    /// as long as the `&mut` borrow of the packet lasts.
    pub(crate) fn as_header(&mut self) -> *mut protocol_binary_request_header {
        debug_assert!(self.len >= HEADER);
        self.words.as_mut_ptr().cast()
    }

    /// Copies the concatenation of `parts` into the buffer.
    fn fill(&mut self, parts: &[&[u8]]) {
        let len: usize = parts.iter().map(|p| p.len()).sum();
        self.words.clear();
        self.words.resize(len.div_ceil(8), 0);
        let base = self.words.as_mut_ptr().cast::<u8>();
        let mut at = 0;
        for part in parts {
            // SAFETY: the buffer holds at least `len` bytes, `at + part.len() <= len`, and it
            // does not overlap `part` (which the caller borrows from elsewhere: `&mut self`).
            unsafe { std::ptr::copy_nonoverlapping(part.as_ptr(), base.add(at), part.len()) };
            at += part.len();
        }
        self.len = len;
    }

    /// The request's bytes.
    #[cfg(test)]
    fn bytes(&self) -> Vec<u8> {
        let all = self.words.iter().flat_map(|w| w.to_ne_bytes());
        all.take(self.len).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_is_its_header_and_parts() {
        let mut p = Packet::default();
        p.request(0x1d, &[0, 0, 0, 9], b"key", b"").expect("fits");
        let bytes = p.bytes();
        assert_eq!(bytes.len(), HEADER + 7);
        assert_eq!(&bytes[..12], &[0x80, 0x1d, 0, 3, 4, 0, 0, 0, 0, 0, 0, 7]);
        assert_eq!(&bytes[HEADER..], b"\0\0\0\x09key");
        assert_eq!(p.opcode(), 0x1d);
        assert_eq!(p.as_header().align_offset(8), 0);
    }

    #[test]
    fn parts_a_header_cannot_describe_are_refused() {
        let mut p = Packet::default();
        let long = vec![0; 70_000];
        assert_eq!(p.request(1, &[], &long, b"").err(), Some(TooLong));
        assert_eq!(p.request(1, &long[..256], b"k", b"").err(), Some(TooLong));
    }

    #[test]
    fn a_copy_is_only_of_a_whole_request() {
        let mut built = Packet::default();
        built
            .request(0x1c, &[1, 2, 3, 4], b"k", b"v")
            .expect("fits");
        let wire = built.bytes();
        let mut p = Packet::default();
        assert_eq!(p.copy_of(&wire).expect("whole").bytes(), wire);
        assert_eq!(p.copy_of(&wire[..wire.len() - 1]).err(), Some(TooLong));
        assert_eq!(p.copy_of(&wire[..10]).err(), Some(TooLong));
        let mut extras_past_body = wire.clone();
        extras_past_body[4] = 200;
        assert_eq!(p.copy_of(&extras_past_body).err(), Some(TooLong));
    }
}
