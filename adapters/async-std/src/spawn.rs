//! [`Spawn`]: the one thing the relay client needs from an executor; with it, what async-io
//! brings to start a driver.

use std::sync::Arc;

use tether_driver::launch::Launch;
use tether_driver::tls::SocketTls;
use tether_driver::{BoxFuture, ConnectError, HttpConnect, WsConnect};

use crate::http::HyperHttp;
use crate::runtime::AsyncIoRuntime;
use crate::ws::AsyncIoWs;

/// Runs a relay driver task in the background.
///
/// Implemented for `AsyncStd` (feature `async-std`), `Smol` (feature `smol`) and for any
/// `Fn(BoxFuture<()>)`, so any executor can be plugged in with a closure.
pub trait Spawn: Send + Sync + 'static {
    /// Run `task` to completion in the background, detached.
    fn spawn(&self, task: BoxFuture<()>);
}

impl<F> Spawn for F
where
    F: Fn(BoxFuture<()>) + Send + Sync + 'static,
{
    fn spawn(&self, task: BoxFuture<()>) {
        self(task);
    }
}

/// Spawns with `async_std::task::spawn`.
#[cfg(feature = "async-std")]
#[derive(Clone, Copy, Debug, Default)]
pub struct AsyncStd;

#[cfg(feature = "async-std")]
impl Spawn for AsyncStd {
    fn spawn(&self, task: BoxFuture<()>) {
        drop(async_std::task::spawn(task));
    }
}

/// Spawns on smol's global executor with `smol::spawn(..).detach()`.
#[cfg(feature = "smol")]
#[derive(Clone, Copy, Debug, Default)]
pub struct Smol;

#[cfg(feature = "smol")]
impl Spawn for Smol {
    fn spawn(&self, task: BoxFuture<()>) {
        smol::spawn(task).detach();
    }
}

/// The spawner [`RelayClient::connect`](crate::RelayClient::connect) uses: async-std's when
/// the `async-std` feature is on, else smol's.
#[cfg(feature = "async-std")]
pub type DefaultSpawn = AsyncStd;

/// The spawner [`RelayClient::connect`](crate::RelayClient::connect) uses: async-std's when
/// the `async-std` feature is on, else smol's.
#[cfg(all(feature = "smol", not(feature = "async-std")))]
pub type DefaultSpawn = Smol;

/// What async-io brings to start a driver: [`AsyncIoRuntime`], async-tungstenite sockets,
/// hyper for NIP-11 documents, and the executor's spawner.
pub(crate) struct AsyncIo<'a>(pub(crate) &'a dyn Spawn);

impl Launch for AsyncIo<'_> {
    type Runtime = AsyncIoRuntime;

    fn runtime(&self) -> AsyncIoRuntime {
        AsyncIoRuntime::new()
    }

    fn ws(&self, tls: SocketTls) -> Arc<dyn WsConnect> {
        AsyncIoWs::new(tls)
    }

    fn http(&self) -> Result<Arc<dyn HttpConnect>, ConnectError> {
        Ok(Arc::new(HyperHttp::default()))
    }

    fn spawn(&self, task: BoxFuture<()>) {
        self.0.spawn(task);
    }
}
