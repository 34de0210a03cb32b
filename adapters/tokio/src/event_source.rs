//! [`EventSource`]: an SSE stream over reqwest.

use tether_driver::EventStream;

use crate::runtime::TokioRuntime;

/// A Server-Sent Events stream kept alive across drops, over reqwest with rustls.
///
/// The runtime-independent [`EventStream`] on tokio's clock: open one with
/// [`EventSource::connect`] (a GET) or [`EventSource::connect_request`] (any method, headers,
/// body), or with your own reqwest client through [`EventSource::open`] and
/// [`ReqwestHttp`](crate::ReqwestHttp). Sends `Accept: text/event-stream` and, after a drop,
/// `Last-Event-ID`; hands the status, content type and `Retry-After` of every response to
/// the core and streams the body into it. Yields every [`Event`](crate::sse::Event):
/// `Open`, `Message`s, `Reconnecting`, `Reconnected` (run one catch-up fetch), and ends
/// after `Failed`, `Closed` or `Ended`. Nothing runs in the background: the body is read as
/// the stream is polled.
///
/// # Example
///
/// Against a one-shot server on 127.0.0.1 that sends one event:
///
/// ```
/// use futures_util::StreamExt;
/// use tether_tokio::{sse, EventSource, EventSourceConfig};
/// use tokio::io::{AsyncReadExt, AsyncWriteExt};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
/// let url = format!("http://{}/events", listener.local_addr()?);
/// tokio::spawn(async move {
///     let (mut conn, _) = listener.accept().await?;
///     let mut request = [0u8; 1024];
///     let _ = conn.read(&mut request).await?;
///     conn.write_all(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\r\n").await?;
///     conn.write_all(b"id: 1\ndata: hello\n\n").await?;
///     std::future::pending::<()>().await;
///     Ok::<_, std::io::Error>(())
/// });
///
/// let mut events = EventSource::connect(&url, EventSourceConfig::default())?;
/// assert_eq!(events.next().await, Some(sse::Event::Open));
/// let Some(sse::Event::Message(message)) = events.next().await else { panic!() };
/// assert_eq!((message.data.as_str(), message.id.as_str()), ("hello", "1"));
/// # Ok(()) }
/// ```
///
/// With your own reqwest client (a proxy, extra roots; no overall request timeout):
///
/// ```no_run
/// use std::sync::Arc;
/// use tether_tokio::{sse, EventSource, EventSourceConfig, ReqwestHttp, TokioRuntime};
///
/// # fn run(client: reqwest::Client) -> Result<(), tether_tokio::ConnectError> {
/// let http = Arc::new(ReqwestHttp::new(client));
/// let events = EventSource::open(
///     "https://example.com/events",
///     sse::Request::get(),
///     EventSourceConfig::default(),
///     TokioRuntime::new(),
///     http,
/// )?;
/// # drop(events);
/// # Ok(()) }
/// ```
pub type EventSource = EventStream<TokioRuntime>;
