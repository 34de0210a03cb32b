//! [`RelayClient`]: a relay connection driven by one tokio task.

use std::ops::Deref;
use std::sync::Arc;

use tether_driver::launch;
use tether_driver::tether_core::nostr::RelayCheckpoint;
use tether_driver::{Config, RelayHandle, Subscription};

use crate::http::ReqwestHttp;
use crate::launch::Tokio;
use crate::runtime::TokioRuntime;
use crate::ConnectError;

/// A connection to one Nostr relay, kept alive by a spawned driver task.
///
/// Cheap to clone; every method of [`RelayHandle`] is available through `Deref`:
/// [`subscribe`](RelayHandle::subscribe), [`unsubscribe`](RelayHandle::unsubscribe),
/// [`publish`](RelayHandle::publish), [`authenticate`](RelayHandle::authenticate),
/// [`disconnect`](RelayHandle::disconnect), [`reconnect`](RelayHandle::reconnect) and
/// [`events`](RelayHandle::events). The task ends when every clone and every
/// [`Subscription`](crate::Subscription) is dropped.
///
/// # Example
///
/// Against tether's test relay on 127.0.0.1 (any NIP-01 relay URL works the same way):
///
/// ```
/// use futures_util::StreamExt;
/// use tether_testserver::server::TestRelay;
/// use tether_testserver::{RelayModel, StoredEvent};
/// use tether_tokio::{Config, Filter, RelayClient, SubscriptionEvent};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let relay = TestRelay::start(RelayModel::with_events(3)).await?;
/// let client = RelayClient::connect(&relay.url(), Config::default())?;
/// let mut sub = client.subscribe(vec![Filter::new(r#"{"kinds":[1]}"#)?]).await?;
/// let mut events = 0;
/// while let Some(item) = sub.next().await {
///     match item {
///         SubscriptionEvent::Event(_) => events += 1,
///         SubscriptionEvent::Eose => break,
///         other => println!("{other:?}"),
///     }
/// }
/// assert_eq!(events, 3);
/// let note = StoredEvent::new(4, 1_700_000_000, 1).json; // a relay would want a signed event
/// let accepted = client.publish(note).await?;
/// println!("published {}", accepted.id);
/// client.disconnect().await?;
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
#[must_use = "the connection closes once every handle and subscription is dropped"]
pub struct RelayClient {
    handle: RelayHandle,
}

impl RelayClient {
    /// Start connecting to `url` (ws:// or wss://) and keep the connection alive until
    /// [`disconnect`](RelayHandle::disconnect) or until every handle is dropped. Returns at
    /// once; the socket opens in the background.
    ///
    /// # Errors
    /// [`ConnectError::InvalidUrl`] when `url` breaks the URL rule
    /// ([`check_ws_url`](tether_driver::check_ws_url): ws:// or wss://, a host, a port of
    /// 1-65535 if one is written); [`ConnectError::Tls`] when `config.roots` cannot be used.
    ///
    /// # Panics
    /// Outside a tokio runtime (the driver is spawned with `tokio::spawn`).
    pub fn connect(url: &str, config: Config) -> Result<RelayClient, ConnectError> {
        let handle = launch::relay(&Tokio, url, config)?;
        Ok(RelayClient { handle })
    }

    /// [`RelayClient::connect`] for a session restored from `checkpoint` (taken with
    /// [`RelayHandle::checkpoint`] in an earlier process): every subscription it held comes
    /// back as a [`Subscription`], in slot order, and catches up from the checkpoint's time
    /// (see [`RelaySession::restore`](tether_driver::tether_core::nostr::RelaySession::restore));
    /// unacknowledged publishes are sent again.
    ///
    /// # Errors
    /// [`ConnectError::InvalidUrl`] and [`ConnectError::Tls`] as for
    /// [`RelayClient::connect`]; [`ConnectError::Checkpoint`] when the checkpoint does not restore.
    ///
    /// # Panics
    /// Outside a tokio runtime.
    pub fn restore(
        url: &str,
        config: Config,
        checkpoint: &RelayCheckpoint,
    ) -> Result<(RelayClient, Vec<Subscription>), ConnectError> {
        let (handle, subscriptions) = launch::relay_restored(&Tokio, url, config, checkpoint)?;
        Ok((RelayClient { handle }, subscriptions))
    }

    /// The runtime-independent handle (what [`Deref`] gives).
    pub fn handle(&self) -> &RelayHandle {
        &self.handle
    }
}

impl Deref for RelayClient {
    type Target = RelayHandle;

    fn deref(&self) -> &RelayHandle {
        &self.handle
    }
}

/// Fetch `relay_url`'s NIP-11 information document (ws:// as http://, wss:// as https://,
/// `Accept: application/nostr+json`) within `policy`'s size and time bounds: its bytes, for
/// [`RelayInfo::parse`](tether_core::nostr::RelayInfo::parse). What [`RelayClient::connect`]
/// does on its own at each connect (cached, refreshed per `policy.refresh_after`); this is
/// for tools that want the document itself, such as `tether info`.
///
/// # Errors
/// [`InfoFetchError`](tether_driver::InfoFetchError) when no document came back.
pub async fn fetch_relay_info(
    relay_url: &str,
    policy: tether_driver::InfoPolicy,
) -> Result<Vec<u8>, tether_driver::InfoFetchError> {
    let http = ReqwestHttp::default_client()
        .map_err(|e| tether_driver::InfoFetchError::Request(e.to_string()))?;
    tether_driver::fetch_info(&TokioRuntime::new(), Arc::new(http), relay_url, policy).await
}
