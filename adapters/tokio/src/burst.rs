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
        let BurstStream { inner, burst } = self.get_mut();
        let poll = burst.poll_read(out.initialize_unfilled(), |buf| {
            let mut read = ReadBuf::new(buf);
            Pin::new(&mut *inner)
                .poll_read(cx, &mut read)
                .map_ok(|()| read.filled().len())
        });
        if let Poll::Ready(Ok(n)) = poll {
            out.advance(n);
        }
        poll.map_ok(|_| ())
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
