//! A connection read through a [`BurstBuffer`]: no read buffer while idle, a large one while
//! busy (see `tether_driver::burst`).

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use futures_io::{AsyncRead, AsyncWrite};
use tether_driver::burst::BurstBuffer;

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
        out: &mut [u8],
    ) -> Poll<io::Result<usize>> {
        let BurstStream { inner, burst } = self.get_mut();
        burst.poll_read(out, |buf| Pin::new(&mut *inner).poll_read(cx, buf))
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

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write_vectored(cx, bufs)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_close(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_close(cx)
    }
}
