//! [`EventSource`]: an SSE stream over hyper.

use std::ops::{Deref, DerefMut};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use futures_util::Stream;
use tether_core::sse::{Event, Request};
use tether_driver::{ConnectError, EventSourceConfig, EventStream};

use crate::http::{check_url, HyperHttp};
use crate::runtime::AsyncIoRuntime;

/// A Server-Sent Events stream kept alive across drops, over hyper's HTTP/1 client with
/// rustls, on async-io.
///
/// The runtime-independent stream is [`EventStream`], which this derefs to (last event ID,
/// counters, `close`). Sends `Accept: text/event-stream` and, after a drop, `Last-Event-ID`; hands the status,
/// content type and `Retry-After` of every response to the core and streams the body into
/// it. Yields every [`Event`]: [`Open`](Event::Open), [`Message`](Event::Message)s,
/// [`Reconnecting`](Event::Reconnecting), [`Reconnected`](Event::Reconnected) (run one
/// catch-up fetch), and ends after [`Failed`](Event::Failed), [`Closed`](Event::Closed) or
/// [`Ended`](Event::Ended).
/// Nothing runs in the background, not even the HTTP connection: it is driven as the stream
/// is polled, so no executor is needed.
///
/// # Example
///
/// Against a one-shot server on 127.0.0.1 that sends one event:
///
/// ```
/// use futures_util::{AsyncReadExt, AsyncWriteExt, StreamExt};
/// use tether_async_std::{sse, EventSource, EventSourceConfig};
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// smol::block_on(async {
///     let listener = smol::net::TcpListener::bind("127.0.0.1:0").await?;
///     let url = format!("http://{}/events", listener.local_addr()?);
///     smol::spawn(async move {
///         let (mut conn, _) = listener.accept().await?;
///         let mut request = [0u8; 1024];
///         let _ = conn.read(&mut request).await?;
///         conn.write_all(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\r\n").await?;
///         conn.write_all(b"id: 1\ndata: hello\n\n").await?;
///         std::future::pending::<()>().await;
///         Ok::<_, std::io::Error>(())
///     })
///     .detach();
///
///     let mut events = EventSource::connect(&url, EventSourceConfig::default())?;
///     assert_eq!(events.next().await, Some(sse::Event::Open));
///     let Some(sse::Event::Message(message)) = events.next().await else { panic!() };
///     assert_eq!((message.data.as_str(), message.id.as_str()), ("hello", "1"));
///     Ok(())
/// })
/// # }
/// ```
#[derive(Debug)]
pub struct EventSource {
    inner: EventStream<AsyncIoRuntime>,
}

impl EventSource {
    /// Start streaming `url` (http:// or https://). Returns at once; the request starts
    /// when the stream is first polled.
    ///
    /// # Errors
    /// [`ConnectError::InvalidUrl`] for a URL that is not http:// or https:// with a host.
    pub fn connect(url: &str, config: EventSourceConfig) -> Result<EventSource, ConnectError> {
        EventSource::connect_request(url, Request::get(), config)
    }

    /// Stream the events `request` to `url` answers with: a POST with headers and a body
    /// (an LLM generation, an MCP call), sent again only where the core's retry-safety rules
    /// allow ([`tether_core::sse::request`]), resumed as its [`Resume`](crate::sse::Resume)
    /// policy says, and ended by its [`EndRules`](crate::sse::EndRules) (`[DONE]`). Returns
    /// at once.
    ///
    /// # Errors
    /// As [`EventSource::connect`].
    pub fn connect_request(
        url: &str,
        request: Request,
        config: EventSourceConfig,
    ) -> Result<EventSource, ConnectError> {
        check_url(url).map_err(ConnectError::InvalidUrl)?;
        let rt = AsyncIoRuntime::new();
        Ok(EventSource {
            inner: EventStream::with_request(url, request, config, rt, Arc::new(HyperHttp)),
        })
    }
}

impl Deref for EventSource {
    type Target = EventStream<AsyncIoRuntime>;

    fn deref(&self) -> &Self::Target {
        &self.inner
    }
}

impl DerefMut for EventSource {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.inner
    }
}

impl Stream for EventSource {
    type Item = Event;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Event>> {
        Pin::new(&mut self.inner).poll_next(cx)
    }
}
