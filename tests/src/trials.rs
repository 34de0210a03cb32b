//! The harness of the test files with real peers (`harness = false` in their `Cargo.toml`):
//! each test is a [libtest-mimic](libtest_mimic) trial, so one whose peer is missing is
//! reported as `ignored` (with the reason) at run time instead of passing vacuously.
//!
//! A test body returns `()` when it needs no peer, and `Result<(), Missing>` when it does: it
//! asks for its peers with [`peer`](crate::peers::peer) or [`python`](crate::peers::python)
//! and `?`. A missing peer ends the trial as
//!
//! ```text
//! test a_tight_proxy_read_timeout_cuts_the_stream_and_nothing_is_lost ... ignored (nginx not found on PATH, in ~/.cargo/bin or /usr/sbin)
//! ```
//!
//! or, with `TETHER_REQUIRE_PEERS=1` (CI sets it), as a failure. [`run`] reads libtest's
//! command line, so `cargo test --test F -- NAME`, `--exact`, `--skip`, `--ignored`,
//! `--include-ignored`, `--list` and `--test-threads` work as with `#[test]`. Unlike libtest,
//! libtest-mimic does not capture a passing test's output.

use std::future::Future;
use std::process::ExitCode;

use libtest_mimic::{Arguments, Completion, Failed, Trial};

use crate::peers::{Missing, REQUIRE_PEERS};

/// What a test body returns: `()` (it needs no peer), or `Result<(), Missing>`.
pub trait Outcome {
    /// `Err` when a peer the test needs is missing.
    ///
    /// # Errors
    /// The missing peer.
    fn into_result(self) -> Result<(), Missing>;
}

impl Outcome for () {
    fn into_result(self) -> Result<(), Missing> {
        Ok(())
    }
}

impl Outcome for Result<(), Missing> {
    fn into_result(self) -> Result<(), Missing> {
        self
    }
}

/// A trial named `name` running `test`: it passes when `test` returns, fails when it panics,
/// and is ignored with the reason when a peer is missing (a failure when
/// `TETHER_REQUIRE_PEERS=1`).
pub fn trial<O, F>(name: impl Into<String>, test: F) -> Trial
where
    O: Outcome,
    F: FnOnce() -> O + Send + 'static,
{
    Trial::ignorable_test(name, move || match test().into_result() {
        Ok(()) => Ok(Completion::Completed),
        Err(missing) if std::env::var(REQUIRE_PEERS).is_ok_and(|v| v == "1") => Err(Failed::from(
            format!("{missing}, and {REQUIRE_PEERS}=1: {}", missing.fix()),
        )),
        Err(missing) => Ok(Completion::ignored_with(missing)),
    })
}

/// [`trial`] for an async test, on a current-thread tokio runtime with I/O and time enabled,
/// as `#[tokio::test]` runs one.
pub fn tokio_trial<O, F, Fut>(name: impl Into<String>, test: F) -> Trial
where
    O: Outcome,
    F: FnOnce() -> Fut + Send + 'static,
    Fut: Future<Output = O>,
{
    trial(name, move || {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a tokio runtime")
            .block_on(test())
    })
}

/// Run `trials` with this process's (libtest's) command line; a test file's `main`.
pub fn run(trials: Vec<Trial>) -> ExitCode {
    libtest_mimic::run(&Arguments::from_args(), trials).exit_code()
}

/// `fn main` of a test file whose tests are all `async fn`s without arguments, each run by
/// [`tokio_trial`] under its own name: `tether_testkit::tokio_main!(first_test, second_test);`.
#[macro_export]
macro_rules! tokio_main {
    ($($test:ident),* $(,)?) => {
        fn main() -> ::std::process::ExitCode {
            $crate::trials::run(::std::vec![
                $($crate::trials::tokio_trial(::std::stringify!($test), $test)),*
            ])
        }
    };
}
