//! [`RelayClient`]: a relay connection driven by one task on async-std or smol.

use std::ops::Deref;

use tether_driver::launch;
use tether_driver::tether_core::nostr::RelayCheckpoint;
use tether_driver::{Config, ConnectError, RelayHandle, Subscription};

use crate::spawn::{AsyncIo, Spawn};

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
/// Against tether's test relay on 127.0.0.1 (any NIP-01 relay URL works the same way; the
/// test relay itself runs on tokio in a thread of its own):
///
/// ```
/// use futures_util::StreamExt;
/// use tether_async_std::{Config, Filter, RelayClient, SubscriptionEvent};
/// use tether_testserver::server::TestRelay;
/// use tether_testserver::RelayModel;
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let server = tokio::runtime::Runtime::new()?;
/// # let relay = server.block_on(TestRelay::start(RelayModel::with_events(3)))?;
/// async_std::task::block_on(async {
///     let client = RelayClient::connect(&relay.url(), Config::default())?;
///     let mut sub = client.subscribe(vec![Filter::new(r#"{"kinds":[1]}"#)?]).await?;
///     let mut events = 0;
///     while let Some(item) = sub.next().await {
///         match item {
///             SubscriptionEvent::Event(_) => events += 1,
///             SubscriptionEvent::Eose => break,
///             other => println!("{other:?}"),
///         }
///     }
///     assert_eq!(events, 3);
///     client.disconnect().await?;
///     Ok(())
/// })
/// # }
/// ```
#[derive(Clone, Debug)]
#[must_use = "the connection closes once every handle and subscription is dropped"]
pub struct RelayClient {
    handle: RelayHandle,
}

impl RelayClient {
    /// Start connecting to `url` (ws:// or wss://) and keep the connection alive until
    /// [`disconnect`](RelayHandle::disconnect) or until every handle is dropped. Returns at
    /// once; the socket opens in the background, in a task spawned with
    /// [`DefaultSpawn`](crate::DefaultSpawn) (async-std's, or smol's without the `async-std`
    /// feature).
    ///
    /// # Errors
    /// [`ConnectError::InvalidUrl`] when `url` breaks the URL rule
    /// ([`check_ws_url`](tether_driver::check_ws_url): ws:// or wss://, a host, a port of
    /// 1-65535 if one is written).
    #[cfg(any(feature = "async-std", feature = "smol"))]
    pub fn connect(url: &str, config: Config) -> Result<RelayClient, ConnectError> {
        RelayClient::connect_with(url, config, &crate::DefaultSpawn::default())
    }

    /// Like [`RelayClient::connect`], spawning the driver with `spawner` (for example
    /// `Smol` with the `smol` feature, or a closure handing the task to your own executor).
    ///
    /// # Errors
    /// [`ConnectError::InvalidUrl`] when `url` breaks the URL rule
    /// ([`check_ws_url`](tether_driver::check_ws_url): ws:// or wss://, a host, a port of
    /// 1-65535 if one is written); [`ConnectError::Tls`] when `config.roots` cannot be used.
    pub fn connect_with(
        url: &str,
        config: Config,
        spawner: &dyn Spawn,
    ) -> Result<RelayClient, ConnectError> {
        let handle = launch::relay(&AsyncIo(spawner), url, config)?;
        Ok(RelayClient { handle })
    }

    /// [`RelayClient::connect`] for a session restored from `checkpoint`, spawned with
    /// [`DefaultSpawn`](crate::DefaultSpawn): see [`RelayClient::restore_with`].
    ///
    /// # Errors
    /// As [`RelayClient::restore_with`].
    #[cfg(any(feature = "async-std", feature = "smol"))]
    pub fn restore(
        url: &str,
        config: Config,
        checkpoint: &RelayCheckpoint,
    ) -> Result<(RelayClient, Vec<Subscription>), ConnectError> {
        RelayClient::restore_with(url, config, checkpoint, &crate::DefaultSpawn::default())
    }

    /// [`RelayClient::connect_with`] for a session restored from `checkpoint` (taken with
    /// [`RelayHandle::checkpoint`] in an earlier process, under any runtime): every
    /// subscription it held comes back as a [`Subscription`], in slot order, and catches up
    /// from the checkpoint's time; unacknowledged publishes are sent again.
    ///
    /// # Errors
    /// [`ConnectError::InvalidUrl`] and [`ConnectError::Tls`] as for
    /// [`RelayClient::connect`]; [`ConnectError::Checkpoint`] when the checkpoint does not restore.
    pub fn restore_with(
        url: &str,
        config: Config,
        checkpoint: &RelayCheckpoint,
        spawner: &dyn Spawn,
    ) -> Result<(RelayClient, Vec<Subscription>), ConnectError> {
        let (handle, subscriptions) =
            launch::relay_restored(&AsyncIo(spawner), url, config, checkpoint)?;
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
