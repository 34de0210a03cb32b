//! A TCP stream read through a [`BurstBuffer`]: no read buffer while idle, a large one while
//! busy (see `tether_driver::burst`).

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use tether_driver::burst::BurstBuffer;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// `S` read through a [`BurstBuffer`]; writes pass straight through.
#[derive(Debug)]
pub(crate) struct BurstStream<S> {
    inner: S,
    burst: BurstBuffer,
}

impl<S> BurstStream<S> {
    pub(crate) fn new(inner: S) -> Self {
        BurstStream {
            inner,
            burst: BurstBuffer::new(),
        }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for BurstStream<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        out: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let taken = this.burst.take(out.initialize_unfilled());
        if taken > 0 {
            out.advance(taken);
            return Poll::Ready(Ok(()));
        }
        if !this.burst.bursting() {
            let (before, asked) = (out.filled().len(), out.remaining());
            let poll = Pin::new(&mut this.inner).poll_read(cx, out);
            match &poll {
                Poll::Ready(Ok(())) => this.burst.read_direct(out.filled().len() - before, asked),
                Poll::Pending => this.burst.idle(),
                Poll::Ready(Err(_)) => {}
            }
            return poll;
        }
        let mut room = ReadBuf::new(this.burst.room());
        match Pin::new(&mut this.inner).poll_read(cx, &mut room) {
            Poll::Pending => {
                this.burst.idle();
                Poll::Pending
            }
            Poll::Ready(Err(error)) => {
                this.burst.filled(0);
                Poll::Ready(Err(error))
            }
            Poll::Ready(Ok(())) => {
                let n = room.filled().len();
                this.burst.filled(n);
                let taken = this.burst.take(out.initialize_unfilled());
                out.advance(taken);
                Poll::Ready(Ok(()))
            }
        }
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for BurstStream<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}
