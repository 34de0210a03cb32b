//! tether-scenarios: the adapters' scenario suite, written once against [`Harness`] and run
//! on every runtime adapter.
//!
//! A scenario is an `async fn` generic over a [`Harness`]: a way to open a relay client and
//! an SSE stream with one adapter, to sleep and read the clock on its runtime, and to run
//! the tokio-based test servers ([`TestRelay`](tether_testkit::server::TestRelay),
//! [`FaultProxy`](tether_testkit::proxy::FaultProxy), [`ScriptedSse`](tether_testserver::sse::ScriptedSse)). [`suite!`] turns
//! every scenario into a `#[test]` for one harness; `tests/` instantiates it for
//! [`harness::Tokio`] (paused clock, servers in the test's runtime), [`harness::AsyncStd`] and
//! [`harness::Smol`] (real time, servers on a tokio thread of their own).
//!
//! Durations are short (a 100 ms reconnect base, a 500 ms liveness budget, 1 s rate-limit
//! windows) so the real-time runs take seconds; bounds on measured times leave room for a
//! loaded machine without letting a wrong behaviour through.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod determinism;
pub mod harness;
pub mod pool;
pub mod relay;
pub mod sse;

use std::future::Future;
use std::ops::Deref;
use std::pin::Pin;

use futures_util::Stream;
use tether_driver::{Config, EventSourceConfig, RelayHandle};

/// A boxed, sendable future.
pub type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send + 'static>>;

/// One runtime adapter, as the scenarios use it.
pub trait Harness: Timer + 'static {
    /// The adapter's relay client.
    type Client: Deref<Target = RelayHandle> + Clone + Send + Sync + 'static;
    /// The adapter's SSE stream.
    type Sse: Stream<Item = tether_core::sse::Event> + Unpin + Send + 'static;

    /// Run a scenario to completion on this runtime (the test's entry point).
    fn run<T>(scenario: impl Future<Output = T>) -> T;

    /// Connect a relay client (the driver is spawned on this runtime).
    fn relay(url: &str, config: Config) -> Self::Client;

    /// Restore a relay client from a checkpoint taken under any runtime, with its
    /// subscriptions' streams (the driver is spawned on this runtime).
    fn restore_relay(
        url: &str,
        config: Config,
        checkpoint: &tether_core::nostr::RelayCheckpoint,
    ) -> (Self::Client, Vec<tether_driver::Subscription>);

    /// Start an empty relay pool (the driver is spawned on this runtime).
    fn pool(
        pool_config: tether_core::pool::PoolConfig,
        config: Config,
    ) -> tether_driver::PoolHandle;

    /// Open an SSE stream.
    fn event_source(url: &str, config: EventSourceConfig) -> Self::Sse;

    /// Open an SSE stream for `request` (`EventSource::connect_request`).
    fn event_source_request(
        url: &str,
        request: tether_core::sse::Request,
        config: EventSourceConfig,
    ) -> Self::Sse;

    /// The last event ID the stream's next request would carry.
    fn last_event_id(sse: &Self::Sse) -> String;

    /// The stream's clock, on which its events' instants (`Reconnecting { at }`) are measured.
    fn sse_now(sse: &Self::Sse) -> tether_core::Instant;

    /// Run `server` (which needs a tokio runtime: it starts a test server) and return what
    /// it returns.
    fn on_server<F>(server: F) -> BoxFuture<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static;
}

// What `peer_suite!` expands to calls.
#[doc(hidden)]
pub use tether_testkit::trials::trial as __trial;

// The waiting helpers, on the harness's clock (every harness is a `Timer`).
pub use tether_testkit::wait::{
    eventually_on as eventually, next_matching_on as next_matching, within, Timer,
};

/// Every scenario as a `#[test]` for the harness `$h` (a full path).
#[macro_export]
macro_rules! suite {
    ($h:ty) => {
        mod relay {
            $crate::__tests!(
                $h,
                relay,
                [
                    stored_events_then_eose_then_live_events,
                    rate_limited_subscriptions_recover_behind_the_gate,
                    replay_after_a_drop_goes_in_paced_batches,
                    accept_then_drop_relay_sees_growing_reconnect_delays,
                    refused_connections_are_retried_until_the_relay_is_back,
                    a_drop_after_n_frames_loses_no_event,
                    a_silent_relay_is_pinged_then_replaced,
                    a_blackholing_proxy_is_detected_like_a_silent_relay,
                    a_zombie_socket_is_found_by_the_resume_probe,
                    a_restored_client_gets_exactly_what_it_missed,
                    a_connection_cut_mid_frame_resumes_without_loss_or_duplicates,
                    auth_required_relay_with_a_signer,
                    auth_by_hand_without_a_signer,
                    publish_outcomes_are_matched_by_event_id,
                    notice_only_limit_is_learned_and_later_subscriptions_queue,
                    the_relay_information_document_is_fetched_and_applied,
                    a_slow_reader_holds_the_relay_back_and_loses_nothing,
                    disconnect_closes_and_never_reconnects,
                    dropping_a_subscription_closes_it_on_the_relay,
                    every_handle_dropped_ends_the_driver,
                ]
            );
        }
        mod pool {
            $crate::__tests!(
                $h,
                pool,
                [
                    a_dead_relay_never_stalls_the_others_and_the_outcome_says_so,
                    verification_drops_forgeries_and_counts_them_against_their_relay,
                    each_relay_of_a_pool_gets_its_information_document,
                    the_same_relay_given_twice_is_one_relay,
                ]
            );
        }
        mod sse {
            $crate::__tests!(
                $h,
                sse,
                [
                    messages_then_reconnect_with_last_event_id,
                    no_content_stops_for_good,
                    unavailable_with_retry_after_waits_at_least_that_long,
                    wrong_content_type_fails_without_retrying,
                    heartbeats_keep_a_quiet_stream_alive,
                    a_silent_server_trips_the_idle_watchdog,
                    an_application_pause_is_not_server_silence,
                    an_id_a_header_cannot_carry_does_not_stop_reconnects,
                    a_refused_port_is_reported_as_connection_refused,
                    a_post_resumes_as_a_get_and_ends_on_done,
                    a_cut_post_with_never_is_not_sent_again,
                    each_attempt_carries_the_token_of_its_time,
                    an_empty_post_says_its_length,
                    a_307_sends_the_post_again_with_its_body,
                    a_302_on_a_post_is_refused,
                    a_redirect_loop_stops_at_the_limit,
                    a_compressed_stream_is_a_typed_failure,
                    a_redirect_to_another_origin_carries_no_credentials,
                ]
            );
        }
    };
}

/// The scenarios with peers in other processes (tinyproxy, nginx, openssl) as trials of
/// tether-testkit's `trials` harness for the harness `$h`, which must run in real time: a
/// `Vec<Trial>` for the `main` of a `harness = false` test file, each trial named
/// `$runtime::sse_peers::<scenario>` and reported as ignored when its peer is missing.
#[macro_export]
macro_rules! peer_suite {
    ($h:ty, $runtime:literal) => {
        $crate::__trials!(
            $h,
            $runtime,
            sse_peers,
            sse,
            [
                a_configured_proxy_carries_the_stream_and_no_proxy_is_honoured,
                https_through_a_tunnel_trusts_the_configured_root,
            ]
        )
    };
}

/// One trial per scenario of module `$m`, for harness `$h`, named `$runtime::$group::<name>`.
#[doc(hidden)]
#[macro_export]
macro_rules! __trials {
    ($h:ty, $runtime:literal, $group:ident, $m:ident, [$($name:ident),* $(,)?]) => {
        ::std::vec![$(
            $crate::__trial(
                ::std::concat!($runtime, "::", ::std::stringify!($group), "::", ::std::stringify!($name)),
                || <$h as $crate::Harness>::run($crate::$m::$name::<$h>()),
            )
        ),*]
    };
}

/// One `#[test]` per scenario of module `$m`, for harness `$h`.
#[doc(hidden)]
#[macro_export]
macro_rules! __tests {
    ($h:ty, $m:ident, [$($name:ident),* $(,)?]) => {$(
        #[test]
        fn $name() {
            <$h as $crate::Harness>::run($crate::$m::$name::<$h>());
        }
    )*};
}
