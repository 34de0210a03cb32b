//! `tether sse`: an SSE endpoint kept open with the SseSession rules, as JSON lines.

use std::pin::pin;
use std::time::Duration;

use futures_util::StreamExt;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use serde::Serialize;
use tether_tokio::sse::{CloseReason, DropReason, Event, FailReason};
use tether_tokio::tether_core::SseConfig;
use tether_tokio::{EventSource, EventSourceConfig};

use crate::output::{millis, JsonLines};
use crate::{parse_secs, stop_requested, Failure};

/// `tether sse <URL>`
///
/// Writes one JSON object per line to stdout: `open`, `message` (`event`, `data`, `id`),
/// `reconnecting` (`in_ms`, `last_event_id`, `attempt`, `why`), `reconnected` (`gap_ms`),
/// `failed` (`status`, `reason`) and `closed` (`reason`). Exits 1 after `failed`, 0 after the
/// server's 204, `--duration` or Ctrl-C.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Output, one JSON object per line on stdout: open, message (event, \
    data, id), reconnecting (in_ms, last_event_id, attempt, why), reconnected (gap_ms), failed \
    (status, reason), closed (reason). Diagnostics go to stderr.\n\
    Exit codes: 0 done (204, --duration, Ctrl-C), 1 after failed, 2 bad arguments."
)]
pub(crate) struct Args {
    /// The endpoint, http:// or https://.
    url: String,
    /// An extra request header, `Name: value` (repeatable).
    #[arg(short = 'H', long = "header", value_name = "NAME: VALUE")]
    headers: Vec<String>,
    /// Reconnect after this many seconds without a byte, heartbeats included (default 90;
    /// 0 turns the watchdog off).
    #[arg(long, value_name = "SECS", value_parser = parse_secs)]
    idle_timeout: Option<Duration>,
    /// Seed for the reconnect jitter, for a reproducible run (default: from the OS).
    #[arg(long, value_name = "N")]
    seed: Option<u64>,
    /// Stop after this many seconds and exit 0.
    #[arg(long, value_name = "SECS", value_parser = parse_secs)]
    duration: Option<Duration>,
}

/// One line of `tether sse` output.
#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Line<'a> {
    Open,
    Message {
        event: &'a str,
        data: &'a str,
        id: &'a str,
    },
    Reconnecting {
        in_ms: u64,
        last_event_id: &'a str,
        attempt: u32,
        why: String,
    },
    Reconnected {
        gap_ms: u64,
    },
    Failed {
        status: Option<u16>,
        reason: String,
    },
    Closed {
        reason: &'static str,
    },
}

/// Run `tether sse`.
///
/// # Errors
/// [`Failure::Usage`] for a bad URL or header; [`Failure::Failed`] when the server refuses
/// in a way retrying will not fix.
pub(crate) async fn run(args: Args) -> Result<(), Failure> {
    let headers = parse_headers(&args.headers)?;
    let client = reqwest::Client::builder()
        .default_headers(headers)
        .build()
        .map_err(|e| Failure::Failed(format!("HTTP client: {e}")))?;
    let mut sse = SseConfig::default();
    if let Some(idle) = args.idle_timeout {
        sse.idle_timeout = (!idle.is_zero()).then_some(idle);
    }
    let config = EventSourceConfig {
        sse,
        seed: args.seed,
    };
    let stop = stop_requested()?;
    let mut stream = EventSource::with_client(&args.url, config, client)
        .map_err(|e| Failure::Usage(e.to_string()))?;
    let mut out = JsonLines::new();
    let mut stop = pin!(stop);
    let deadline = tokio::time::sleep(args.duration.unwrap_or(Duration::MAX / 4));
    let mut deadline = pin!(deadline);
    loop {
        let event = tokio::select! {
            biased;
            () = &mut stop => break,
            () = &mut deadline, if args.duration.is_some() => break,
            event = stream.next() => event,
        };
        let Some(event) = event else {
            return Ok(());
        };
        match &event {
            Event::Failed { why } => {
                let (status, reason) = failure(why);
                out.write(&Line::Failed { status, reason })?;
                return Err(Failure::Failed(format!("{}: the server refused", args.url)));
            }
            Event::Closed { why } => {
                out.write(&Line::Closed {
                    reason: closed_reason(*why),
                })?;
                return Ok(());
            }
            other => write_event(&mut out, other, stream.last_event_id())?,
        }
    }
    stream.close();
    Ok(())
}

fn write_event(out: &mut JsonLines, event: &Event, last_event_id: &str) -> Result<(), Failure> {
    let line = match event {
        Event::Open => Line::Open,
        Event::Message(message) => Line::Message {
            event: &message.event,
            data: &message.data,
            id: &message.id,
        },
        Event::Reconnecting {
            why,
            attempt,
            delay,
        } => Line::Reconnecting {
            in_ms: millis(*delay),
            last_event_id,
            attempt: *attempt,
            why: drop_reason(*why),
        },
        Event::Reconnected { gap } => Line::Reconnected {
            gap_ms: millis(*gap),
        },
        Event::ParseError(error) => {
            tracing::warn!(?error, "part of the stream was too large and was dropped");
            return Ok(());
        }
        other => {
            tracing::debug!(?other, "sse event");
            return Ok(());
        }
    };
    Ok(out.write(&line)?)
}

/// The HTTP status behind a failure (200 for a wrong content type), and why.
fn failure(why: &FailReason) -> (Option<u16>, String) {
    match why {
        FailReason::Status(status) => (Some(*status), format!("HTTP status {status}")),
        FailReason::ContentType(kind) => (
            Some(200),
            format!(
                "content type {} is not text/event-stream",
                kind.as_deref().unwrap_or("(none)")
            ),
        ),
        FailReason::Exhausted(last) => {
            let status = match last {
                DropReason::Status(status) => Some(*status),
                _ => None,
            };
            (
                status,
                format!("gave up reconnecting; last: {}", drop_reason(*last)),
            )
        }
    }
}

fn drop_reason(why: DropReason) -> String {
    match why {
        DropReason::Status(status) => format!("HTTP status {status}"),
        DropReason::NetworkError => "network error".into(),
        DropReason::Eof => "stream ended".into(),
        DropReason::ConnectTimeout => "no response in time".into(),
        DropReason::IdleTimeout => "idle timeout".into(),
    }
}

fn closed_reason(why: CloseReason) -> &'static str {
    match why {
        CloseReason::NoContent => "204 No Content: the server asked to stop",
        CloseReason::Local => "closed",
    }
}

/// Parse `-H 'Name: value'` arguments.
///
/// # Errors
/// [`Failure::Usage`] naming the first header that is not `Name: value`.
fn parse_headers(args: &[String]) -> Result<HeaderMap, Failure> {
    let mut headers = HeaderMap::new();
    for arg in args {
        let bad = |why: &str| Failure::Usage(format!("header {arg:?}: {why}"));
        let Some((name, value)) = arg.split_once(':') else {
            return Err(bad("expected 'Name: value'"));
        };
        let name = HeaderName::from_bytes(name.trim().as_bytes())
            .map_err(|_| bad("not a valid header name"))?;
        let value =
            HeaderValue::from_str(value.trim()).map_err(|_| bad("not a valid header value"))?;
        headers.append(name, value);
    }
    Ok(headers)
}
