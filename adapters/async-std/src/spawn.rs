//! [`Spawn`]: the one thing the relay client needs from an executor.

use tether_driver::BoxFuture;

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
