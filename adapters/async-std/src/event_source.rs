//! [`EventSource`]: an SSE stream over hyper.

use tether_driver::EventStream;

use crate::runtime::AsyncIoRuntime;

/// A Server-Sent Events stream kept alive across drops, over hyper's HTTP/1 client with
/// rustls, on async-io.
///
/// The runtime-independent [`EventStream`] on async-io's clock: open one with
/// [`EventSource::connect`] (a GET) or [`EventSource::connect_request`] (any method, headers,
/// body). Sends `Accept: text/event-stream` and, after a drop, `Last-Event-ID`; hands the
/// status, content type and `Retry-After` of every response to the core and streams the
/// body into it. Yields every [`Event`](crate::sse::Event): `Open`, `Message`s,
/// `Reconnecting`, `Reconnected` (run one catch-up fetch), and ends after `Failed`, `Closed`
/// or `Ended`. Nothing runs in the background, not even the HTTP connection: it is driven
/// as the stream is polled, so no executor is needed.
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
pub type EventSource = EventStream<AsyncIoRuntime>;
