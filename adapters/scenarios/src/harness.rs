//! The harnesses: tether-tokio on a paused tokio clock (and in real time, for peers in other
//! processes), tether-async-std on async-std and on smol in real time.

use std::future::Future;
use std::sync::OnceLock;
use std::time::Duration;

use futures_util::FutureExt;
use tether_driver::{Config, EventSourceConfig};

use crate::{BoxFuture, Harness, Timer};

/// tether-tokio. Each scenario gets a current-thread runtime with a paused clock; the test
/// servers run in it too, so the server's clock is the client's and waits take no time.
pub type Tokio = TokioOn<true>;

/// tether-tokio in real time, for scenarios with peers in other processes (a proxy, nginx):
/// a paused clock would jump ahead while the runtime waits on them.
pub type TokioRealTime = TokioOn<false>;

/// tether-tokio on a current-thread runtime whose clock is paused or not.
#[derive(Debug)]
pub struct TokioOn<const PAUSED: bool>;

impl<const PAUSED: bool> Timer for TokioOn<PAUSED> {
    fn sleep(duration: Duration) -> BoxFuture<()> {
        tether_testkit::wait::Tokio::sleep(duration)
    }

    fn now() -> std::time::Instant {
        tether_testkit::wait::Tokio::now()
    }
}

impl<const PAUSED: bool> Harness for TokioOn<PAUSED> {
    type Client = tether_tokio::RelayClient;
    type Sse = tether_tokio::EventSource;

    fn run<T>(scenario: impl Future<Output = T>) -> T {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .start_paused(PAUSED)
            .build()
            .expect("a tokio runtime")
            .block_on(scenario)
    }

    fn relay(url: &str, config: Config) -> Self::Client {
        tether_tokio::RelayClient::connect(url, config).expect("a ws:// URL")
    }

    fn restore_relay(
        url: &str,
        config: Config,
        checkpoint: &tether_core::nostr::RelayCheckpoint,
    ) -> (Self::Client, Vec<tether_driver::Subscription>) {
        tether_tokio::RelayClient::restore(url, config, checkpoint).expect("a checkpoint")
    }

    fn pool(
        pool_config: tether_core::pool::PoolConfig,
        config: Config,
    ) -> tether_driver::PoolHandle {
        tether_tokio::pool(pool_config, config)
    }

    fn event_source(url: &str, config: EventSourceConfig) -> Self::Sse {
        tether_tokio::EventSource::connect(url, config).expect("an http:// URL")
    }

    fn event_source_request(
        url: &str,
        request: tether_core::sse::Request,
        config: EventSourceConfig,
    ) -> Self::Sse {
        tether_tokio::EventSource::connect_request(url, request, config).expect("an http:// URL")
    }

    fn last_event_id(sse: &Self::Sse) -> String {
        sse.last_event_id().to_owned()
    }

    fn sse_now(sse: &Self::Sse) -> tether_core::Instant {
        sse.now()
    }

    fn on_server<F>(server: F) -> BoxFuture<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        Box::pin(server)
    }
}

/// A harness for tether-async-std on an executor in real time; the two differ only in how a
/// scenario is blocked on and which spawner the client gets.
macro_rules! real_time_harness {
    ($(#[$doc:meta])* $name:ident, $block_on:path, $spawner:expr) => {
        $(#[$doc])*
        #[derive(Debug)]
        pub struct $name;

        impl Timer for $name {
            fn sleep(duration: Duration) -> BoxFuture<()> {
                Box::pin(async_io::Timer::after(duration).map(drop))
            }

            fn now() -> std::time::Instant {
                std::time::Instant::now()
            }
        }

        impl Harness for $name {
            type Client = tether_async_std::RelayClient;
            type Sse = tether_async_std::EventSource;

            fn run<T>(scenario: impl Future<Output = T>) -> T {
                $block_on(scenario)
            }

            fn relay(url: &str, config: Config) -> Self::Client {
                tether_async_std::RelayClient::connect_with(url, config, &$spawner)
                    .expect("a ws:// URL")
            }

            fn restore_relay(
                url: &str,
                config: Config,
                checkpoint: &tether_core::nostr::RelayCheckpoint,
            ) -> (Self::Client, Vec<tether_driver::Subscription>) {
                tether_async_std::RelayClient::restore_with(url, config, checkpoint, &$spawner)
                    .expect("a checkpoint")
            }

            fn pool(
                pool_config: tether_core::pool::PoolConfig,
                config: Config,
            ) -> tether_driver::PoolHandle {
                tether_async_std::pool_with(pool_config, config, &$spawner)
            }

            fn event_source(url: &str, config: EventSourceConfig) -> Self::Sse {
                tether_async_std::EventSource::connect(url, config).expect("an http:// URL")
            }

            fn event_source_request(
                url: &str,
                request: tether_core::sse::Request,
                config: EventSourceConfig,
            ) -> Self::Sse {
                tether_async_std::EventSource::connect_request(url, request, config)
                    .expect("an http:// URL")
            }

            fn last_event_id(sse: &Self::Sse) -> String {
                sse.last_event_id().to_owned()
            }

            fn sse_now(sse: &Self::Sse) -> tether_core::Instant {
                sse.now()
            }

            fn on_server<F>(server: F) -> BoxFuture<F::Output>
            where
                F: Future + Send + 'static,
                F::Output: Send + 'static,
            {
                on_server_thread(server)
            }
        }
    };
}

real_time_harness!(
    /// tether-async-std with async-std's executor (`block_on`, the [`AsyncStd`] spawner).
    ///
    /// [`AsyncStd`]: tether_async_std::AsyncStd
    AsyncStd,
    async_std::task::block_on,
    tether_async_std::AsyncStd
);

real_time_harness!(
    /// tether-async-std with smol's executor (`smol::block_on`, the [`Smol`] spawner).
    ///
    /// [`Smol`]: tether_async_std::Smol
    Smol,
    smol::block_on,
    tether_async_std::Smol
);

/// Run `server` on the process's tokio server runtime (two worker threads, real time) and
/// await its output from any executor.
fn on_server_thread<F>(server: F) -> BoxFuture<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    static SERVERS: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    let runtime = SERVERS.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("test-servers")
            .enable_all()
            .build()
            .expect("a tokio runtime for the test servers")
    });
    let task = runtime.spawn(server);
    Box::pin(task.map(|output| output.expect("the server task")))
}
