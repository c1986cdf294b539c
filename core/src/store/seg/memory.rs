//! The segment store's raw memory, and the one place in the store that holds `unsafe` code.
//!
//! A [`Words`] is a run of words taken from the OS as one anonymous mapping (`MAP_NORESERVE`:
//! pages become resident as they are first written, so the resident set grows with what the
//! store uses, never past the mapping) and handed back with the mapping's drop. Under
//! `--cfg mcb_loom` it is a boxed slice of loom's atomics instead, so that the models see every
//! access, with a `sync::AccessLog` per word on which the byte-run copies record their reads
//! and writes: the bytes are the host's plain memory in the std build, so a reuse that does
//! not happen after every read of the bytes it overwrites is a race, and loom reports it
//! although the words are atomic.
//!
//! Every access from Rust is atomic: a word is read and written through an `AtomicU32` or
//! `AtomicU64` made over the mapping, and byte runs are copied word by word. So no Rust access
//! races another, whatever the protocol above does: a logic error in reclamation could make a
//! reader see another item's bytes, never cause undefined behaviour. (Relaxed atomic accesses
//! compile to the plain moves a `memcpy` would make.) The only non-atomic accesses are the
//! host's, in C, through [`Words::ptr`]: memcached's engine interface has the host fill an
//! allocated item's value in place and read a held item's bytes, and the C boundary answers
//! for keeping those to items no other thread writes.

#![allow(unsafe_code)]

use crate::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::fmt;

/// The machine's page: what [`Words::release`] hands back at a time.
#[cfg(not(mcb_loom))]
const PAGE: usize = 4096;

/// An atomic word type a region is made of.
pub(crate) trait Word: Sized + Send + Sync {
    /// Its size in bytes (a power of two).
    const BYTES: usize;
    /// A zero word (the loom build's backing store).
    #[cfg(mcb_loom)]
    fn zero() -> Self;
}

impl Word for AtomicU32 {
    const BYTES: usize = 4;
    #[cfg(mcb_loom)]
    fn zero() -> Self {
        AtomicU32::new(0)
    }
}

impl Word for AtomicU64 {
    const BYTES: usize = 8;
    #[cfg(mcb_loom)]
    fn zero() -> Self {
        AtomicU64::new(0)
    }
}

/// `len` words of type `W`, zeroed when made (see the module docs).
pub(crate) struct Words<W: Word> {
    #[cfg(not(mcb_loom))]
    map: Mapping,
    #[cfg(mcb_loom)]
    words: Box<[W]>,
    /// Per word: the byte-run copies' accesses (see the module docs).
    #[cfg(mcb_loom)]
    log: Box<[crate::sync::AccessLog]>,
    len: usize,
    #[cfg(not(mcb_loom))]
    _word: std::marker::PhantomData<W>,
}

impl<W: Word> fmt::Debug for Words<W> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Words({} x {} bytes)", self.len, W::BYTES)
    }
}

impl<W: Word> Words<W> {
    /// `len` zeroed words, or `None` when the OS refuses the mapping.
    pub(crate) fn new(len: usize) -> Option<Self> {
        #[cfg(not(mcb_loom))]
        {
            let map = Mapping::new(len.checked_mul(W::BYTES)?.max(1))?;
            Some(Self {
                map,
                len,
                _word: std::marker::PhantomData,
            })
        }
        #[cfg(mcb_loom)]
        {
            Some(Self {
                words: (0..len).map(|_| W::zero()).collect(),
                log: (0..len).map(|_| crate::sync::AccessLog::new()).collect(),
                len,
            })
        }
    }

    /// How many words.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Word `i` (panics past the end).
    #[inline]
    pub(crate) fn at(&self, i: usize) -> &W {
        assert!(i < self.len, "word {i} past a region of {}", self.len);
        #[cfg(not(mcb_loom))]
        {
            // SAFETY: in bounds (checked above) of a live mapping that `self` owns, aligned (the
            // mapping is page-aligned and `i * BYTES` a multiple of the word's alignment), and
            // only ever accessed atomically from Rust (module docs); the reference lives no
            // longer than `&self`, hence the mapping. `W` is `AtomicU32` or `AtomicU64`, whose
            // in-memory representation is that of the integer, so any bits are a valid value.
            unsafe { &*self.map.ptr.add(i * W::BYTES).cast::<W>() }
        }
        #[cfg(mcb_loom)]
        {
            &self.words[i]
        }
    }

    /// Words `from..to` (panics past the end): bulk copies check their bounds once.
    #[inline]
    pub(crate) fn span(&self, from: usize, to: usize) -> &[W] {
        assert!(
            from <= to && to <= self.len,
            "words {from}..{to} past a region of {}",
            self.len
        );
        #[cfg(not(mcb_loom))]
        {
            // SAFETY: in bounds (checked above) of the live mapping `self` owns, aligned, and
            // only accessed atomically (see `at`); the slice lives no longer than `&self`.
            unsafe {
                std::slice::from_raw_parts(self.map.ptr.add(from * W::BYTES).cast::<W>(), to - from)
            }
        }
        #[cfg(mcb_loom)]
        {
            &self.words[from..to]
        }
    }

    /// Hands the pages wholly inside bytes `[from, to)` back to the OS (`MADV_DONTNEED`): they
    /// read as zeros afterwards and stop counting in the resident set. A no-op under loom.
    pub(crate) fn release(&self, from: usize, to: usize) {
        #[cfg(not(mcb_loom))]
        self.map.release(from, to.min(self.len * W::BYTES));
        #[cfg(mcb_loom)]
        let _ = (from, to);
    }

    /// A pointer to byte `offset` (at most the region's size), for the host: creating it is
    /// safe; what is written or read through it is the C boundary's contract (module docs).
    #[cfg(not(mcb_loom))]
    pub(crate) fn ptr(&self, offset: usize) -> *mut u8 {
        assert!(offset <= self.len * W::BYTES, "offset past the region");
        self.map.ptr.wrapping_add(offset)
    }
}

impl Words<AtomicU32> {
    /// The words that bytes `offset..offset + len` lie in, for a byte-run copy that reads
    /// them (`write` false) or writes them; the loom build records the access (module docs).
    #[inline]
    fn run(&self, offset: usize, len: usize, write: bool) -> &[AtomicU32] {
        let (from, to) = (offset / 4, (offset + len).div_ceil(4));
        #[cfg(mcb_loom)]
        for entry in &self.log[from..to] {
            if write {
                entry.write();
            } else {
                entry.read();
            }
        }
        #[cfg(not(mcb_loom))]
        let _ = write;
        self.span(from, to)
    }

    /// Copies `out.len()` bytes starting at byte `offset` into `out`: a partial first word,
    /// whole words, a partial last word.
    #[inline]
    pub(crate) fn load_bytes(&self, offset: usize, out: &mut [u8]) {
        if out.is_empty() {
            return;
        }
        let skip = offset % 4;
        let words = self.run(offset, out.len(), false);
        // Relaxed (every load here): a published item's bytes were written before its slot's
        // Release store, which the reader's Acquire load of the slot ordered before this.
        let load = |word: &AtomicU32| word.load(Ordering::Relaxed).to_le_bytes();
        let (mut words, mut out) = (words, out);
        if skip != 0 {
            let n = (4 - skip).min(out.len());
            out[..n].copy_from_slice(&load(&words[0])[skip..skip + n]);
            out = &mut out[n..];
            words = &words[1..];
        }
        let whole = out.len() & !3;
        let (body, tail) = out.split_at_mut(whole);
        for (word, chunk) in words[..whole / 4].iter().zip(body.chunks_exact_mut(4)) {
            chunk.copy_from_slice(&load(word));
        }
        if !tail.is_empty() {
            let n = tail.len();
            tail.copy_from_slice(&load(&words[words.len() - 1])[..n]);
        }
    }

    /// Whether the `bytes.len()` bytes at byte `offset` (a multiple of 4: where a key starts)
    /// are `bytes`: whole words compared as words, the last one under a mask.
    #[inline]
    pub(crate) fn eq_bytes(&self, offset: usize, bytes: &[u8]) -> bool {
        debug_assert!(offset % 4 == 0);
        let words = self.run(offset, bytes.len(), false);
        let mut chunks = bytes.chunks_exact(4);
        for (chunk, word) in chunks.by_ref().zip(words) {
            let want = u32::from_le_bytes(chunk.try_into().expect("chunks of 4"));
            // Relaxed: as in `load_bytes`.
            if word.load(Ordering::Relaxed) != want {
                return false;
            }
        }
        let rest = chunks.remainder();
        if rest.is_empty() {
            return true;
        }
        let mut want = [0u8; 4];
        want[..rest.len()].copy_from_slice(rest);
        let mask = u32::MAX >> (8 * (4 - rest.len()));
        // Relaxed: as in `load_bytes`.
        let have = words[words.len() - 1].load(Ordering::Relaxed);
        have & mask == u32::from_le_bytes(want)
    }

    /// Writes `bytes` at byte `offset`. The words it touches belong to a run the caller owns
    /// (reserved and not yet published); bytes of its edge words outside `bytes` are kept.
    #[inline]
    pub(crate) fn store_bytes(&self, offset: usize, bytes: &[u8]) {
        if bytes.is_empty() {
            return;
        }
        let skip = offset % 4;
        let words = self.run(offset, bytes.len(), true);
        // Relaxed (every access here): the caller's own run, published later by the slot's
        // Release store.
        let merge = |word: &AtomicU32, skip: usize, part: &[u8]| {
            let mut value = word.load(Ordering::Relaxed).to_le_bytes();
            value[skip..skip + part.len()].copy_from_slice(part);
            word.store(u32::from_le_bytes(value), Ordering::Relaxed);
        };
        let (mut words, mut bytes) = (words, bytes);
        if skip != 0 {
            let n = (4 - skip).min(bytes.len());
            merge(&words[0], skip, &bytes[..n]);
            bytes = &bytes[n..];
            words = &words[1..];
        }
        // Whole words first, by index over slices of known lengths (no per-word checks: a
        // copy of a 100-byte value spent more on them than on the stores).
        let (body, tail) = bytes.split_at(bytes.len() & !3);
        for (word, chunk) in words[..body.len() / 4].iter().zip(body.chunks_exact(4)) {
            let chunk = [chunk[0], chunk[1], chunk[2], chunk[3]];
            word.store(u32::from_le_bytes(chunk), Ordering::Relaxed);
        }
        if !tail.is_empty() {
            merge(&words[words.len() - 1], 0, tail);
        }
    }

    /// Zeroes `len` bytes at byte `offset` (an allocated value, before the host fills it).
    pub(crate) fn zero_bytes(&self, offset: usize, len: usize) {
        const ZEROS: [u8; 64] = [0; 64];
        let mut done = 0;
        while done < len {
            let n = (len - done).min(ZEROS.len());
            self.store_bytes(offset + done, &ZEROS[..n]);
            done += n;
        }
    }

    /// Copies `len` bytes from byte `from` of `source` to byte `to` of `self` (the target a run
    /// the caller owns, as in `store_bytes`).
    pub(crate) fn copy_from(&self, to: usize, source: &Self, from: usize, len: usize) {
        let mut chunk = [0u8; 256];
        let mut done = 0;
        while done < len {
            let n = (len - done).min(chunk.len());
            source.load_bytes(from + done, &mut chunk[..n]);
            self.store_bytes(to + done, &chunk[..n]);
            done += n;
        }
    }
}

/// An anonymous private mapping, unmapped on drop.
#[cfg(not(mcb_loom))]
struct Mapping {
    ptr: *mut u8,
    len: usize,
}

// SAFETY: the mapping is plain memory owned by this value; Rust touches it only through
// atomics (`Words::at`), so sharing or sending it between threads is sound.
#[cfg(not(mcb_loom))]
unsafe impl Send for Mapping {}
// SAFETY: as for `Send`.
#[cfg(not(mcb_loom))]
unsafe impl Sync for Mapping {}

#[cfg(not(mcb_loom))]
impl Mapping {
    fn new(len: usize) -> Option<Self> {
        let len = len.checked_add(PAGE - 1)? & !(PAGE - 1);
        // SAFETY: a fresh anonymous mapping at an address the kernel picks; no existing memory
        // is affected. MAP_NORESERVE: pages are committed as they are first written.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return None;
        }
        // Transparent huge pages would make one write commit 2 MiB: the store counts its
        // memory in pages and segments, so keep 4 KiB pages. (Advice only; failure is fine.)
        // SAFETY: advice on the mapping just made.
        unsafe { libc::madvise(ptr, len, libc::MADV_NOHUGEPAGE) };
        Some(Self {
            ptr: ptr.cast(),
            len,
        })
    }

    fn release(&self, from: usize, to: usize) {
        let from = (from + PAGE - 1) & !(PAGE - 1);
        let to = to.min(self.len) & !(PAGE - 1);
        if from >= to {
            return;
        }
        // SAFETY: whole pages inside the mapping. MADV_DONTNEED on private anonymous memory
        // replaces them with zero-fill pages; concurrent atomic accesses see old bytes or zeros.
        unsafe { libc::madvise(self.ptr.add(from).cast(), to - from, libc::MADV_DONTNEED) };
    }
}

#[cfg(not(mcb_loom))]
impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `new`, unmapped once; every reference into it borrowed
        // `self` and is gone.
        unsafe { libc::munmap(self.ptr.cast(), self.len) };
    }
}

#[cfg(all(test, not(mcb_loom)))]
mod tests {
    use super::*;

    #[test]
    fn bytes_round_trip_at_any_alignment() {
        let words = Words::<AtomicU32>::new(16).unwrap();
        words.store_bytes(3, b"hello, world");
        words.store_bytes(0, b"abc");
        let mut out = [0u8; 15];
        words.load_bytes(0, &mut out);
        assert_eq!(&out, b"abchello, world");
        assert!(words.eq_bytes(4, b"ello, wo"));
        assert!(words.eq_bytes(4, b"ello, w"));
        assert!(!words.eq_bytes(4, b"ello, W"));
        assert!(!words.eq_bytes(4, b"ellO"));
        words.zero_bytes(5, 4);
        words.load_bytes(0, &mut out);
        assert_eq!(&out, b"abche\0\0\0\0 world");
        let other = Words::<AtomicU32>::new(16).unwrap();
        other.copy_from(1, &words, 3, 5);
        let mut got = [0u8; 6];
        other.load_bytes(0, &mut got);
        assert_eq!(&got, b"\0he\0\0\0");
    }

    #[test]
    fn released_pages_read_as_zeros() {
        let words = Words::<AtomicU64>::new(PAGE / 8 * 3).unwrap();
        words.at(PAGE / 8).store(7, Ordering::Relaxed);
        words.release(PAGE, 2 * PAGE);
        assert_eq!(words.at(PAGE / 8).load(Ordering::Relaxed), 0);
    }
}
