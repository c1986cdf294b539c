//! A connection's buffered, blocking socket I/O: one read buffer and one write buffer, reused
//! for every request. Output is flushed whenever the connection would block waiting for input,
//! so pipelined requests are answered in one write and quiet commands cost no write at all.

use std::io::{self, Read, Write};
use std::net::TcpStream;

/// Buffers grown past this are shrunk back once drained (one huge value should not pin
/// megabytes per idle connection).
const KEEP: usize = 64 * 1024;
const INITIAL: usize = 16 * 1024;

#[derive(Debug)]
pub struct Io {
    stream: TcpStream,
    rbuf: Vec<u8>,
    start: usize,
    end: usize,
    pub wbuf: Vec<u8>,
}

impl Io {
    pub fn new(stream: TcpStream) -> Io {
        Io {
            stream,
            rbuf: vec![0; INITIAL],
            start: 0,
            end: 0,
            wbuf: Vec::with_capacity(INITIAL),
        }
    }

    /// The buffered, unconsumed input.
    pub fn buffered(&self) -> &[u8] {
        &self.rbuf[self.start..self.end]
    }

    /// The first `n` buffered bytes (the caller made them available with [`Io::fill`]) and
    /// the write buffer, borrowed together.
    pub fn packet_and_out(&mut self, n: usize) -> (&[u8], &mut Vec<u8>) {
        (&self.rbuf[self.start..self.start + n], &mut self.wbuf)
    }

    /// Drops `n` bytes of buffered input.
    pub fn consume(&mut self, n: usize) {
        self.start = (self.start + n).min(self.end);
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
            if self.rbuf.len() > KEEP {
                self.rbuf.truncate(INITIAL);
                self.rbuf.shrink_to(INITIAL);
            }
        }
    }

    /// Makes at least `n` bytes available in [`Io::buffered`], reading (and first flushing
    /// output) as needed. `Ok(false)` when the peer closed before sending them.
    pub fn fill(&mut self, n: usize) -> io::Result<bool> {
        while self.end - self.start < n {
            if self.start + n > self.rbuf.len() {
                self.rbuf.copy_within(self.start..self.end, 0);
                self.end -= self.start;
                self.start = 0;
                if n > self.rbuf.len() {
                    self.rbuf.resize(n, 0);
                }
            }
            if self.read_some()? == 0 {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// Reads what the socket has into the free end of the buffer (at least one byte, or 0 at
    /// end of stream), flushing output first: the peer may be waiting for it.
    fn read_some(&mut self) -> io::Result<usize> {
        self.flush()?;
        if self.end == self.rbuf.len() {
            let grow = self.rbuf.len();
            self.rbuf.resize(grow * 2, 0);
        }
        loop {
            match self.stream.read(&mut self.rbuf[self.end..]) {
                Ok(n) => {
                    self.end += n;
                    return Ok(n);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
        }
    }

    /// Reads more input without a target size (for line protocols); 0 at end of stream.
    pub fn read_more(&mut self) -> io::Result<usize> {
        if self.start > 0 && self.end == self.rbuf.len() {
            self.rbuf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
        self.read_some()
    }

    /// Fills `dst` from buffered input, then straight from the socket.
    pub fn read_exact_into(&mut self, dst: &mut [u8]) -> io::Result<()> {
        let have = (self.end - self.start).min(dst.len());
        dst[..have].copy_from_slice(&self.rbuf[self.start..self.start + have]);
        self.consume(have);
        if have < dst.len() {
            self.flush()?;
            self.stream.read_exact(&mut dst[have..])?;
        }
        Ok(())
    }

    /// Discards `n` bytes of input (a value nobody stores).
    pub fn skip(&mut self, mut n: u64) -> io::Result<()> {
        while n > 0 {
            if self.start == self.end && self.read_more()? == 0 {
                return Err(io::ErrorKind::UnexpectedEof.into());
            }
            let have = (self.end - self.start).min(usize::try_from(n).unwrap_or(usize::MAX));
            self.consume(have);
            n -= have as u64;
        }
        Ok(())
    }

    /// Writes out the queued output once it is large: a client that pipelines without reading
    /// meets TCP's back-pressure instead of growing our buffer.
    pub fn flush_if_large(&mut self) -> io::Result<()> {
        if self.wbuf.len() >= KEEP {
            self.flush()?;
        }
        Ok(())
    }

    /// Writes out everything queued.
    pub fn flush(&mut self) -> io::Result<()> {
        if !self.wbuf.is_empty() {
            self.stream.write_all(&self.wbuf)?;
            self.wbuf.clear();
            if self.wbuf.capacity() > KEEP {
                self.wbuf.shrink_to(INITIAL);
            }
        }
        Ok(())
    }
}
