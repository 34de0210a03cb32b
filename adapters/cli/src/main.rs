//! `tether`: Nostr subscriptions and SSE streams that survive real servers, from a terminal.
//!
//! - `tether demo` runs tether against an in-process relay that rate-limits, caps
//!   subscriptions, demands NIP-42 auth and drops every socket now and then, shows what the
//!   session does about it, and ends with a summary that checks the claim.
//! - `tether req <URL> [FILTER_JSON ...]` keeps subscriptions open on a real relay and writes
//!   what happens as JSON lines.
//! - `tether sse <URL>` streams an SSE endpoint as JSON lines.
//! - `tether info <RELAY>` prints the relay's NIP-11 document and what tether applies.
//!
//! The binary renders what tether-tokio reports; every protocol decision is the core's.

mod demo;
mod info;
mod mcp;
mod output;
mod req;
mod signer;
mod sse;
mod state;

use std::process::ExitCode;
use std::time::Duration;

use clap::{ArgAction, Parser, Subcommand};
use tracing_subscriber::EnvFilter;

/// tether: subscriptions that survive real relays.
#[derive(Debug, Parser)]
#[command(name = "tether", version, about, long_about = None)]
struct Cli {
    /// More diagnostics on stderr: -v info, -vv debug, -vvv trace (RUST_LOG is used when
    /// no -v is given).
    #[arg(short, long, action = ArgAction::Count, global = true)]
    verbose: u8,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Keep subscriptions open on a relay; write what happens as JSON lines.
    Req(req::Args),
    /// Stream a Server-Sent Events endpoint as JSON lines.
    Sse(Box<sse::Args>),
    /// Run ~60 subscriptions against a hostile in-process relay and check the claim.
    Demo(demo::Args),
    /// Print a relay's NIP-11 document and what tether applies from it, as JSON lines.
    Info(info::Args),
}

/// Why a command did not succeed; decides the exit code.
#[derive(Debug)]
pub(crate) enum Failure {
    /// The command line cannot be used (bad URL, filter, header or key): exit 2, like a
    /// usage error from clap.
    Usage(String),
    /// It ran and failed: exit 1.
    Failed(String),
    /// Whoever read stdout went away: stop quietly, exit 0.
    StdoutClosed,
}

impl From<std::io::Error> for Failure {
    fn from(error: std::io::Error) -> Self {
        if error.kind() == std::io::ErrorKind::BrokenPipe {
            Failure::StdoutClosed
        } else {
            Failure::Failed(format!("writing to stdout: {error}"))
        }
    }
}

/// One socket per relay: raise the soft limit on open files to the hard one, so that a `req`
/// over thousands of relays is not stopped at the default 1 024. What is still out of reach
/// is each relay's `out_of_files` disconnect, retried with backoff.
fn raise_open_files_limit() {
    #[cfg(unix)]
    {
        use rustix::process::{getrlimit, setrlimit, Resource, Rlimit};
        let limit = getrlimit(Resource::Nofile);
        if limit.current != limit.maximum {
            let raised = Rlimit {
                current: limit.maximum,
                maximum: limit.maximum,
            };
            if let Err(error) = setrlimit(Resource::Nofile, raised) {
                tracing::debug!(%error, "the open files limit stays where it is");
            }
        }
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // The demo draws its own picture of what the session does; the driver's own logs
    // would only scribble over it unless asked for.
    let default_level = match cli.command {
        Command::Demo(_) => "error",
        Command::Req(_) | Command::Sse(_) | Command::Info(_) => "warn",
    };
    init_tracing(cli.verbose, default_level);
    if matches!(cli.command, Command::Req(_)) {
        raise_open_files_limit();
    }
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("tether: cannot start the tokio runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    let outcome = runtime.block_on(async {
        match cli.command {
            Command::Req(args) => req::run(args).await,
            Command::Sse(args) => sse::run(*args).await,
            Command::Demo(args) => demo::run(args).await,
            Command::Info(args) => info::run(args).await,
        }
    });
    match outcome {
        Ok(()) | Err(Failure::StdoutClosed) => ExitCode::SUCCESS,
        Err(Failure::Usage(message)) => {
            eprintln!("tether: {message}");
            ExitCode::from(2)
        }
        Err(Failure::Failed(message)) => {
            eprintln!("tether: {message}");
            ExitCode::FAILURE
        }
    }
}

/// Diagnostics go to stderr so stdout stays pure JSON lines.
fn init_tracing(verbose: u8, default_level: &str) {
    let filter = match verbose {
        0 => EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default_level)),
        1 => EnvFilter::new("info"),
        2 => EnvFilter::new("debug"),
        _ => EnvFilter::new("trace"),
    };
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
}

/// Parse a number of seconds (fractions allowed) for `--duration` and friends.
pub(crate) fn parse_secs(text: &str) -> Result<Duration, String> {
    let secs: f64 = text
        .parse()
        .map_err(|_| format!("{text:?} is not a number of seconds"))?;
    Duration::try_from_secs_f64(secs).map_err(|_| format!("{text:?}: expected 0 or more seconds"))
}

/// The process's stop and continue signals as the application's lifecycle: SIGTSTP (Ctrl-Z)
/// is a suspend, told to the sessions before the process stops itself; SIGCONT (after
/// Ctrl-Z, or a SIGSTOP that cannot be caught) is a resume, whose probe finds a socket that
/// died meanwhile. Never resolves where there are no such signals.
pub(crate) struct StopContinue {
    #[cfg(unix)]
    stop: tokio::signal::unix::Signal,
    #[cfg(unix)]
    resume: tokio::signal::unix::Signal,
}

impl StopContinue {
    /// Install the handlers now, so a signal that arrives before the first `next` counts.
    pub(crate) fn install() -> Result<StopContinue, Failure> {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{signal, SignalKind};
            let install = |raw: i32, name: &str| {
                signal(SignalKind::from_raw(raw))
                    .map_err(|e| Failure::Failed(format!("cannot handle {name}: {e}")))
            };
            Ok(StopContinue {
                stop: install(libc::SIGTSTP, "SIGTSTP")?,
                resume: install(libc::SIGCONT, "SIGCONT")?,
            })
        }
        #[cfg(not(unix))]
        Ok(StopContinue {})
    }

    /// The next signal, as the lifecycle input it stands for.
    pub(crate) async fn next(&mut self) -> tether_tokio::Lifecycle {
        #[cfg(unix)]
        {
            tokio::select! {
                _ = self.stop.recv() => tether_tokio::Lifecycle::Suspended,
                _ = self.resume.recv() => tether_tokio::Lifecycle::Resumed,
            }
        }
        #[cfg(not(unix))]
        std::future::pending().await
    }
}

/// Stop the process as SIGTSTP's default action would have (the handler took it), once the
/// sessions were told. Returns when the process is continued.
pub(crate) fn stop_self() {
    #[cfg(unix)]
    {
        use rustix::process::{getpid, kill_process, Signal};
        if let Err(error) = kill_process(getpid(), Signal::STOP) {
            tracing::warn!(%error, "could not stop after SIGTSTP");
        }
    }
}

/// Resolves when the process is asked to stop (Ctrl-C, or SIGTERM on unix).
///
/// The handlers are installed before this returns, so a signal that arrives before the
/// future is first polled still counts instead of killing the process.
pub(crate) fn stop_requested() -> Result<impl std::future::Future<Output = ()>, Failure> {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        let install =
            |kind| signal(kind).map_err(|e| Failure::Failed(format!("cannot handle signals: {e}")));
        let mut interrupt = install(SignalKind::interrupt())?;
        let mut terminate = install(SignalKind::terminate())?;
        Ok(async move {
            tokio::select! {
                _ = interrupt.recv() => {}
                _ = terminate.recv() => {}
            }
        })
    }
    #[cfg(not(unix))]
    {
        Ok(async {
            let _ = tokio::signal::ctrl_c().await;
        })
    }
}
