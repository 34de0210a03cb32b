//! A socket's read buffer that exists only while the socket is busy.
//!
//! Thousands of mostly idle relay connections cannot each keep tungstenite's default 128 KiB
//! read buffer, which it zeroes whole before every read (so every page of it is resident);
//! a small fixed buffer instead costs a busy connection a syscall per few events. A
//! [`BurstBuffer`] sits between the socket and the WebSocket codec, whose own read buffer is
//! kept small ([`CODEC_READ_BUFFER`]):
//!
//! - **Direct**: while reads come in small pieces, the codec reads the socket itself, into
//!   its own small buffer; nothing is allocated here.
//! - **Burst**: a read that fills the codec's buffer means more is waiting. From the next read
//!   on, the socket is read [`BURST_CAPACITY`] bytes at a time into a buffer allocated for the
//!   burst, and the codec is served from it.
//! - The first read that finds the socket empty while the burst buffer is drained frees it:
//!   an idle connection holds none.
//!
//! [`BurstBuffer::poll_read`] is the whole read step; the runtime adapters only wrap their
//! socket type around it (tokio's `AsyncRead`, the futures `AsyncRead` of async-io).

use std::io;
use std::task::Poll;

/// The WebSocket codec's own read buffer asked for: a frame's header and a small frame fit.
/// (After a client handshake tungstenite keeps the 4 KiB buffer it read the response into
/// instead, so an idle connection's codec holds 4 KiB.)
pub const CODEC_READ_BUFFER: usize = 2 * 1024;

/// Bytes read from the socket at a time during a burst.
pub const BURST_CAPACITY: usize = 64 * 1024;

/// The read state of one socket; see the [module docs](self).
#[derive(Debug, Default)]
pub struct BurstBuffer {
    /// The burst's buffer, `BURST_CAPACITY` bytes; empty (unallocated) outside a burst.
    buf: Vec<u8>,
    /// `buf[start..end]` is read from the socket and not yet handed to the codec.
    start: usize,
    end: usize,
    /// The next socket read goes through `buf`.
    bursting: bool,
}

impl BurstBuffer {
    /// A buffer in direct mode, holding nothing.
    #[must_use]
    pub fn new() -> Self {
        BurstBuffer::default()
    }

    /// One read into `out` for the codec: from the burst's buffer while it holds bytes,
    /// else from the socket through `read` (a socket read into the slice it is given): into
    /// `out` itself while reads are small, into the burst's buffer during a burst. How many
    /// bytes `out` got.
    ///
    /// # Errors
    /// The socket's read error.
    pub fn poll_read(
        &mut self,
        out: &mut [u8],
        mut read: impl FnMut(&mut [u8]) -> Poll<io::Result<usize>>,
    ) -> Poll<io::Result<usize>> {
        let taken = self.take(out);
        if taken > 0 {
            return Poll::Ready(Ok(taken));
        }
        if !self.bursting {
            let poll = read(out);
            match &poll {
                Poll::Ready(Ok(n)) => self.read_direct(*n, out.len()),
                Poll::Pending => self.idle(),
                Poll::Ready(Err(_)) => {}
            }
            return poll;
        }
        match read(self.room()) {
            Poll::Pending => {
                self.idle();
                Poll::Pending
            }
            Poll::Ready(Err(error)) => {
                self.filled(0);
                Poll::Ready(Err(error))
            }
            Poll::Ready(Ok(n)) => {
                self.filled(n);
                Poll::Ready(Ok(self.take(out)))
            }
        }
    }

    /// Copy buffered bytes into `out`; how many (0 when none are buffered).
    fn take(&mut self, out: &mut [u8]) -> usize {
        let n = (self.end - self.start).min(out.len());
        out[..n].copy_from_slice(&self.buf[self.start..self.start + n]);
        self.start += n;
        n
    }

    /// A direct read of `n` bytes into a buffer of `asked` bytes: a full one starts a burst.
    fn read_direct(&mut self, n: usize, asked: usize) {
        if n > 0 && n == asked {
            self.bursting = true;
        }
    }

    /// The buffer to read the socket into during a burst, once the buffered bytes are taken.
    /// Allocated (and zeroed) once per burst, not per read.
    fn room(&mut self) -> &mut [u8] {
        debug_assert_eq!(self.start, self.end, "read the socket only when drained");
        if self.buf.is_empty() {
            self.buf = vec![0; BURST_CAPACITY];
        }
        self.start = 0;
        self.end = 0;
        &mut self.buf[..]
    }

    /// A burst read put `n` bytes into [`BurstBuffer::room`]. A read of 0 bytes (the end of
    /// the stream) ends the burst.
    fn filled(&mut self, n: usize) {
        self.start = 0;
        self.end = n.min(self.buf.len());
        if n == 0 {
            self.idle();
        }
    }

    /// The socket had nothing to read: when drained, the burst is over and its buffer freed.
    fn idle(&mut self) {
        if self.start == self.end {
            self.buf = Vec::new();
            self.start = 0;
            self.end = 0;
            self.bursting = false;
        }
    }

    /// Heap bytes held now.
    #[must_use]
    pub fn held(&self) -> usize {
        self.buf.capacity()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_reads_go_direct_and_allocate_nothing() {
        let mut b = BurstBuffer::new();
        b.read_direct(600, CODEC_READ_BUFFER);
        assert!(!b.bursting);
        b.idle();
        assert_eq!(b.held(), 0);
    }

    #[test]
    fn a_full_read_starts_a_burst_that_ends_and_frees_when_the_socket_is_empty() {
        let mut b = BurstBuffer::new();
        b.read_direct(CODEC_READ_BUFFER, CODEC_READ_BUFFER);
        assert!(b.bursting);
        let room = b.room();
        assert_eq!(room.len(), BURST_CAPACITY);
        room[..10].copy_from_slice(b"0123456789");
        b.filled(10);
        assert_eq!(b.held(), BURST_CAPACITY);
        // Not drained: an empty socket does not end the burst yet.
        b.idle();
        let mut out = [0u8; 4];
        assert_eq!(b.take(&mut out), 4);
        assert_eq!(&out, b"0123");
        let mut rest = [0u8; 16];
        assert_eq!(b.take(&mut rest), 6);
        assert_eq!(&rest[..6], b"456789");
        assert_eq!(b.take(&mut rest), 0);
        b.idle();
        assert_eq!((b.held(), b.bursting), (0, false));
    }

    #[test]
    fn a_read_goes_direct_until_one_fills_the_codec_then_through_the_burst_until_empty() {
        let mut b = BurstBuffer::new();
        let mut socket: Vec<u8> = (0..=255u8).cycle().take(10_000).collect();
        let mut read = |buf: &mut [u8]| -> Poll<io::Result<usize>> {
            if socket.is_empty() {
                return Poll::Pending;
            }
            let n = buf.len().min(socket.len());
            buf[..n].copy_from_slice(&socket[..n]);
            socket.drain(..n);
            Poll::Ready(Ok(n))
        };
        let mut out = [0u8; 100];
        // Direct: the socket fills the codec's 100 bytes, so the next read is a burst.
        assert!(matches!(
            b.poll_read(&mut out, &mut read),
            Poll::Ready(Ok(100))
        ));
        assert_eq!((b.bursting, b.held()), (true, 0));
        assert!(matches!(
            b.poll_read(&mut out, &mut read),
            Poll::Ready(Ok(100))
        ));
        assert_eq!(b.held(), BURST_CAPACITY, "the rest came in one socket read");
        assert_eq!(
            out[0], 100,
            "in order: the second read serves bytes 100..200"
        );
        let mut got = 200;
        while let Poll::Ready(Ok(n)) = b.poll_read(&mut out, &mut read) {
            got += n;
        }
        assert_eq!(got, 10_000);
        assert_eq!(
            (b.bursting, b.held()),
            (false, 0),
            "drained and empty: freed"
        );
    }

    #[test]
    fn the_end_of_the_stream_ends_the_burst() {
        let mut b = BurstBuffer::new();
        b.read_direct(8, 8);
        let _ = b.room();
        b.filled(0);
        assert_eq!((b.held(), b.bursting), (0, false));
    }
}
