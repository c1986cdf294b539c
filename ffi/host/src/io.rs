//! A connection's non-blocking buffers. [`Input`] grows with the bytes that arrive (never with
//! the size a header declares) and is given back when drained; a storage command's value goes
//! past it, straight into its item ([`Landing`]: one `readv` fills the rest of the value and the
//! input buffer's free space together); [`Output`] queues encoded bytes and held items
//! ([`Value`]), written from the engine's memory as the socket accepts them, so a reply naming
//! many large items never exists whole in memory, and a batch of answers leaves in one
//! `writev`.

#![deny(unsafe_code)]

use crate::engine::{Blank, Value, IOVS};
use std::collections::VecDeque;
use std::io::{self, IoSlice, IoSliceMut, Read, Write};

/// The least an output buffer a worker lends holds (a 100-key multi-get's answers fit).
const OUTPUT_BUFFER: usize = 32 * 1024;
/// The most an output buffer taken back to lend again may hold (a larger one is freed).
const OUTPUT_KEEP: usize = 2 * OUTPUT_HIGH;
/// An input buffer as a worker lends it ([`Buffers`]), and the least one grows by: a read takes
/// a whole small request, or a 10 KB value with its header, at once.
const BUFFER: usize = 16 * 1024;
/// Most buffers a worker keeps for its connections to borrow.
const POOLED: usize = 16;
/// Queued bytes past which a connection stops producing output until the socket drains.
pub const OUTPUT_HIGH: usize = 64 * 1024;
/// Values up to this size are copied into the output; larger ones are held and written from
/// the item (a copy is cheaper than holding a reference for small values).
pub const COPY_MAX: usize = 8 * 1024;
/// Most pieces handed to one `writev`.
const SLICES: usize = 32;

/// The buffers a worker lends its connections, as memcached's worker threads lend theirs: a
/// connection holds an input buffer only while bytes of a request are buffered (it gives it
/// back when the socket has nothing more) and an output buffer only during its turn or while
/// output waits for the socket, so an idle connection holds neither, and a busy one reads into
/// a buffer already allocated and zeroed, and encodes into one already grown, instead of new
/// ones per request.
#[derive(Debug, Default)]
pub struct Buffers {
    free: Vec<Vec<u8>>,
    outputs: Vec<Vec<u8>>,
}

impl Buffers {
    fn take(&mut self) -> Vec<u8> {
        self.free.pop().unwrap_or_else(|| vec![0; BUFFER])
    }

    /// Takes `buf` back to lend again (one that grew past the standard size is freed).
    fn give(&mut self, buf: Vec<u8>) {
        if buf.len() == BUFFER && self.free.len() < POOLED {
            self.free.push(buf);
        }
    }

    fn take_output(&mut self) -> Vec<u8> {
        self.outputs
            .pop()
            .unwrap_or_else(|| Vec::with_capacity(OUTPUT_BUFFER))
    }

    fn give_output(&mut self, mut buf: Vec<u8>) {
        buf.clear();
        if buf.capacity() >= OUTPUT_BUFFER
            && buf.capacity() <= OUTPUT_KEEP
            && self.outputs.len() < POOLED
        {
            self.outputs.push(buf);
        }
    }
}

/// Bytes read and not yet consumed.
#[derive(Debug, Default)]
pub struct Input {
    buf: Vec<u8>,
    start: usize,
    end: usize,
    /// The last read returned less than it had room for and no readable event came since:
    /// the socket had no more bytes then, and (edge-triggered) the next byte to arrive brings
    /// a new event.
    drained: bool,
    /// An event said the peer ended its stream: reads go on until they return 0, whatever a
    /// short read suggests (the end may be queued behind the bytes it returned, with no event
    /// to come for it).
    read_closed: bool,
}

impl Input {
    /// The buffered, unconsumed input.
    pub fn buffered(&self) -> &[u8] {
        &self.buf[self.start..self.end]
    }

    /// Drops `n` bytes of buffered input; a drained buffer that grew past the standard size
    /// is freed.
    pub fn consume(&mut self, n: usize) {
        self.start = (self.start + n).min(self.end);
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
            if self.buf.len() > BUFFER {
                self.buf = Vec::new();
            }
        }
    }

    /// Drops up to `n` buffered bytes (a body nobody reads); how many of the `n` are still to
    /// come.
    pub fn discard(&mut self, n: usize) -> usize {
        let have = self.buffered().len().min(n);
        self.consume(have);
        n - have
    }

    /// Whether the socket had nothing more at the last read, no event came since and the peer
    /// has not ended its stream: reading again would only say it would block. A short read is
    /// not an empty socket by itself: the peer's end of stream can be queued behind it.
    pub fn take_drained(&mut self) -> bool {
        std::mem::take(&mut self.drained) && !self.read_closed
    }

    /// A readable event came (`read_closed`: it says the peer ended its stream): bytes may have
    /// arrived since the last read.
    pub fn readable(&mut self, read_closed: bool) {
        self.drained = false;
        self.read_closed |= read_closed;
    }

    /// Gives the buffer back to `buffers` if nothing is buffered (an idle connection).
    pub fn release_if_empty(&mut self, buffers: &mut Buffers) {
        if self.start == self.end {
            buffers.give(std::mem::take(&mut self.buf));
            (self.start, self.end) = (0, 0);
        }
    }

    /// One read from `r` into the free end of the buffer (borrowed from `buffers` when the
    /// connection holds none), which grows only when the bytes already arrived fill it; 0 at
    /// end of stream. With a `landing` whose value is not yet whole (and so with nothing
    /// buffered: the landing took it), the read is one `readv` into the rest of the value
    /// first, then the buffer.
    pub fn read_from(
        &mut self,
        r: &mut impl Read,
        landing: Option<&mut Landing>,
        buffers: &mut Buffers,
    ) -> io::Result<usize> {
        let mut landing = landing.filter(|l| !l.is_full());
        if self.buf.is_empty() {
            self.buf = buffers.take();
        } else if self.end == self.buf.len() {
            if self.start > 0 {
                self.buf.copy_within(self.start..self.end, 0);
                self.end -= self.start;
                self.start = 0;
            } else {
                let grow = self.buf.len().max(BUFFER);
                self.buf.resize(self.buf.len() + grow, 0);
            }
        }
        loop {
            let room = self.buf.len() - self.end;
            let read = match landing.as_deref_mut() {
                None => r.read(&mut self.buf[self.end..]).map(|n| (n, 0)),
                Some(l) => l.read_with(r, &mut self.buf[self.end..]),
            };
            match read {
                Ok((n, wanted)) => {
                    let landed = n.min(wanted);
                    if let Some(l) = landing.as_deref_mut() {
                        l.at += landed;
                    }
                    self.end += n - landed;
                    self.drained = n < room + wanted;
                    return Ok(n);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    self.drained = false;
                    return Err(e);
                }
            }
        }
    }
}

/// A fresh item's value arriving: its bytes go straight into the item, copied from the input
/// buffer as far as it reaches ([`Landing::take_from`]), then read from the socket into the
/// item itself ([`Input::read_from`]).
#[derive(Debug)]
pub struct Landing {
    blank: Blank<'static>,
    /// Bytes of the value in place so far.
    at: usize,
}

impl Landing {
    pub fn new(blank: Blank<'static>) -> Landing {
        Landing { blank, at: 0 }
    }

    /// Whether the whole value is in.
    pub fn is_full(&self) -> bool {
        self.at == self.blank.len()
    }

    /// The item, filled so far.
    pub fn blank(&self) -> &Blank<'static> {
        &self.blank
    }

    /// Moves buffered input into the value, as far as either reaches.
    pub fn take_from(&mut self, input: &mut Input) {
        let n = self.blank.write_at(self.at, input.buffered());
        input.consume(n);
        self.at += n;
    }

    /// One `readv` into the rest of the value, then `rest` (the input buffer's free space):
    /// how many bytes it read, and how many of the value it wanted (the first of those bytes
    /// are the value's).
    fn read_with(&mut self, r: &mut impl Read, rest: &mut [u8]) -> io::Result<(usize, usize)> {
        let wanted = self.blank.len() - self.at;
        let mut slices: [IoSliceMut<'_>; IOVS + 1] =
            std::array::from_fn(|_| IoSliceMut::new(&mut []));
        let mut n = 0;
        for piece in self.blank.unfilled(self.at) {
            slices[n] = IoSliceMut::new(piece);
            n += 1;
        }
        slices[n] = IoSliceMut::new(rest);
        let read = r.read_vectored(&mut slices[..=n])?;
        Ok((read, wanted))
    }
}

/// A queued piece of output older than the tail.
#[derive(Debug)]
enum Segment {
    Bytes(Vec<u8>),
    Value(Value<'static>),
}

/// The pieces of one `writev`, gathered on the stack (no allocation per write).
struct Gather<'a> {
    slices: [IoSlice<'a>; SLICES],
    n: usize,
}

impl<'a> Gather<'a> {
    /// Adds `piece` after skipping `skip` of the bytes offered so far; false once full.
    fn push(&mut self, piece: &'a [u8], skip: &mut usize) -> bool {
        if *skip >= piece.len() {
            *skip -= piece.len();
        } else if self.n < SLICES {
            self.slices[self.n] = IoSlice::new(&piece[*skip..]);
            self.n += 1;
            *skip = 0;
        }
        self.n < SLICES
    }
}

impl Segment {
    /// Adds the unsent pieces, after `skip` bytes already sent.
    fn gather<'a>(&'a self, mut skip: usize, out: &mut Gather<'a>) {
        match self {
            Segment::Bytes(b) => {
                out.push(b, &mut skip);
            }
            Segment::Value(v) => {
                for piece in v.value() {
                    if !out.push(piece, &mut skip) {
                        return;
                    }
                }
            }
        }
    }

    fn len(&self) -> usize {
        match self {
            Segment::Bytes(b) => b.len(),
            Segment::Value(v) => v.len(),
        }
    }
}

/// Output queued for the socket: older segments (bytes and held values), then the tail, the
/// bytes being encoded now.
#[derive(Debug, Default)]
pub struct Output {
    queue: VecDeque<Segment>,
    /// Bytes of the front segment already written.
    sent: usize,
    tail: Vec<u8>,
    /// Bytes of the tail already written (when the queue is empty).
    tail_sent: usize,
    /// Bytes queued in `queue` (values included).
    queued: usize,
}

impl Output {
    /// The bytes being encoded now, after everything queued.
    pub fn tail(&mut self) -> &mut Vec<u8> {
        &mut self.tail
    }

    /// How many tail bytes there are: a mark to [`Output::truncate`] back to.
    pub fn mark(&self) -> usize {
        self.tail.len()
    }

    /// Drops tail bytes encoded after `mark` (a request that must run again).
    pub fn truncate(&mut self, mark: usize) {
        self.tail.truncate(mark.max(self.tail_sent));
    }

    /// Queues a held value after the tail; it is released once written.
    pub fn push_value(&mut self, value: Value<'static>) {
        self.seal_tail();
        self.queued += value.len();
        self.queue.push_back(Segment::Value(value));
    }

    fn seal_tail(&mut self) {
        if self.tail.len() > self.tail_sent {
            let mut bytes = std::mem::take(&mut self.tail);
            bytes.drain(..self.tail_sent);
            self.queued += bytes.len();
            self.queue.push_back(Segment::Bytes(bytes));
        } else {
            self.tail.clear();
        }
        self.tail_sent = 0;
    }

    /// Borrows an output buffer from `buffers` for a turn, if the connection holds none.
    pub fn lend(&mut self, buffers: &mut Buffers) {
        if self.tail.capacity() == 0 {
            self.tail = buffers.take_output();
        }
    }

    /// Gives the output buffer back to `buffers` if everything is written (an idle connection
    /// holds none).
    pub fn give_back(&mut self, buffers: &mut Buffers) {
        if self.is_empty() {
            buffers.give_output(std::mem::take(&mut self.tail));
            self.tail_sent = 0;
        }
    }

    /// Unsent bytes.
    pub fn len(&self) -> usize {
        self.queued - self.sent + self.tail.len() - self.tail_sent
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether the connection should stop producing output until the socket takes some: a
    /// held value is queued, or more than [`OUTPUT_HIGH`] bytes.
    pub fn is_full(&self) -> bool {
        self.queue.iter().any(|s| matches!(s, Segment::Value(_))) || self.len() > OUTPUT_HIGH
    }

    /// Writes as much as the socket accepts. `Ok(true)` when everything is out, `Ok(false)`
    /// when the socket would block.
    pub fn write_to(&mut self, w: &mut impl Write) -> io::Result<bool> {
        while !self.is_empty() {
            let written = if self.queue.is_empty() {
                // Only the tail (most answers): one slice, no gather array to fill.
                w.write_vectored(&[IoSlice::new(&self.tail[self.tail_sent..])])
            } else {
                let mut gather = Gather {
                    slices: [IoSlice::new(&[]); SLICES],
                    n: 0,
                };
                let mut skip = self.sent;
                for segment in &self.queue {
                    segment.gather(skip, &mut gather);
                    skip = 0;
                    if gather.n == SLICES {
                        break;
                    }
                }
                if self.tail.len() > self.tail_sent {
                    gather.push(&self.tail[self.tail_sent..], &mut 0);
                }
                w.write_vectored(&gather.slices[..gather.n])
            };
            let n = match written {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
                Err(e) => return Err(e),
            };
            self.advance(n);
        }
        Ok(true)
    }

    /// Marks `n` bytes written, releasing segments (and their items) as they complete.
    fn advance(&mut self, mut n: usize) {
        while n > 0 {
            let Some(front) = self.queue.front() else {
                self.tail_sent += n;
                break;
            };
            let left = front.len() - self.sent;
            if n < left {
                self.sent += n;
                return;
            }
            n -= left;
            self.queued -= front.len();
            self.sent = 0;
            self.queue.pop_front();
        }
        if self.tail_sent == self.tail.len() {
            self.tail.clear();
            self.tail_sent = 0;
        }
    }
}
