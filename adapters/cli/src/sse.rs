//! `tether sse`: an SSE endpoint kept open with the SseSession rules, as JSON lines.

use std::pin::pin;
use std::time::Duration;

use futures_util::StreamExt;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use tether_tokio::sse::{AttemptInfo, DropReason, Event, Request, Resume, SseCheckpoint};
use tether_tokio::tether_driver::http_options::Proxies;
use tether_tokio::tether_driver::{AttemptParts, PerAttempt};
use tether_tokio::{ConnectError, EventSource, EventSourceConfig, HttpOptions, ProxyConfig, Roots};

use crate::mcp::Mcp;
use tether_tokio::tether_core::line::sse::Line as SseLine;
use tether_tokio::tether_core::line::Limiter;

use crate::output::JsonLines;
use crate::state::StateFile;
use crate::{parse_secs, stop_requested, Failure};

/// `tether sse <URL>`
///
/// Writes one JSON object per line to stdout: `open`, `message` (`event`, `data`, `id`),
/// `reconnecting` (`in_ms`, `last_event_id`, `attempt`, `why`, `status`, `reason`),
/// `reconnected` (`gap_ms`), `reissued` (`gap_ms`, `attempts`), `peer_error` (`kind`, `excerpt`, `suppressed`), `failed`
/// (`status`, `reason`, and `kind`, `events`, `last_event_id`, `body` where they apply),
/// `ended` (`why`, `event`, `events`, `last_event_id`) and `closed` (`reason`). Exits 1 after
/// `failed`, 0 after `ended`, the server's 204, `--duration` or Ctrl-C.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Output, one JSON object per line on stdout: open, message (event, \
    data, id), reconnecting (in_ms, last_event_id, attempt, why, status, reason), reconnected \
    (gap_ms), reissued (gap_ms, attempts: requests since the cut), peer_error (kind, excerpt, suppressed), failed (status, reason, kind, events, \
    last_event_id, body), ended (why, event, events, last_event_id), closed (reason). \
    Diagnostics go to stderr.\n\n\
    A request that is not repeatable (POST, unless --resume same) is sent again only before \
    its stream opened (refused connection, 408, 429, 502, 503, 504; a 500 may come from the \
    application after it acted: failed kind rejected). Once it opened, --resume decides: \
    never (default for POST: the loss ends it, failed kind interrupted, or ended why eof when \
    no --end-data/--end-event was given), same (send it again), last-event-id[:METHOD] \
    (send METHOD, GET by default, with the same headers, no body and Last-Event-ID: MCP \
    Streamable HTTP 2025-11-25), reissue[:N] (send the request again as a new request, no \
    Last-Event-ID: MCP 2026-07-28; at most N, default 5, re-issues in a row that open no \
    stream, then failed kind reissue_exhausted). Redirects: 307 and 308 are followed (the same \
    method and body), 301, 302 and 303 only for a GET (failed kind redirect otherwise), at \
    most 5 in one attempt, never from https to http. The request asks for Accept-Encoding: \
    identity; a compressed stream fails (kind content_encoding). failed.kind is one of \
    status, content_type, content_encoding, redirect, exhausted, invalid_request, rejected (body holds the first bytes of the server's answer), \
    interrupted, resume_exhausted, reissue_exhausted, session_gone (a resume got 404), error_event (body holds its data).\n\n\
    reconnecting.why is one of: status (with the HTTP status in status), eof, idle_timeout, \
    connect_timeout, connection_refused, tls_rejected, handshake_failed, network_error, \
    restarted (the process stopped while the request was out: --state); \
    reason says the same for a person.\n\n\
    peer_error reports what the server got wrong while the stream carries on. kind is \
    line_too_long or event_too_large (that part of the stream was dropped; excerpt names the \
    limit), or unsendable_id (an id no HTTP header can carry: the message keeps it, and a \
    reconnect resumes from the last id that can be sent, shown as last_event_id; excerpt is \
    the id's first 64 characters). At most 10 peer_error lines are written per second; \
    suppressed, when present, counts the ones left out since the last line.\n\n\
    Exit codes: 0 done (ended, 204, --duration, Ctrl-C), 1 after failed, 2 bad arguments."
)]
pub(crate) struct Args {
    /// The endpoint, http:// or https://.
    url: String,
    /// An extra request header, `Name: value` (repeatable).
    #[arg(short = 'H', long = "header", value_name = "NAME: VALUE")]
    headers: Vec<String>,
    /// The request method (default GET, or POST with --data).
    #[arg(short = 'X', long = "request", value_name = "METHOD")]
    method: Option<String>,
    /// The request body, or `@FILE` to read it from a file.
    #[arg(short = 'd', long = "data", value_name = "BODY|@FILE")]
    data: Option<String>,
    /// What to do when an opened stream is lost: never, same, last-event-id (optionally with
    /// :METHOD, e.g. last-event-id:GET) or reissue (optionally with :N, the re-issues in a
    /// row that may fail; default 5) (default: same for GET, never for POST).
    #[arg(long, value_name = "POLICY")]
    resume: Option<String>,
    /// End cleanly (no reconnect) on a message whose data is exactly this, e.g. `[DONE]`.
    #[arg(long, value_name = "DATA")]
    end_data: Option<String>,
    /// End cleanly (no reconnect) on a message of this event type.
    #[arg(long, value_name = "EVENT")]
    end_event: Option<String>,
    /// Fail on a message of this event type, e.g. `error`.
    #[arg(long, value_name = "EVENT")]
    fail_event: Option<String>,
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
    /// Keep the stream's state in FILE and resume from it: the last event ID, the server's
    /// retry, how many messages came, and whether the server had the request. If FILE exists
    /// the run goes on from it (a GET resumes with Last-Event-ID; a request that is not safe
    /// to repeat is not sent again unless --resume says so). No credentials and no body are
    /// written. FILE is replaced atomically at least once a second while anything changes
    /// and at exit. A FILE that is not a tether state file, is corrupt, is for another URL
    /// or from a newer tether: exit 2, FILE untouched.
    #[arg(long, value_name = "FILE")]
    state: Option<std::path::PathBuf>,
    /// Run CMD (through sh) before each request and send the `Name: value` lines it prints as
    /// that request's headers, in place of any -H of the same name: a fresh token per attempt.
    /// TETHER_ATTEMPT (1 for the first request) and TETHER_AFTER (why the last one ended, empty
    /// for the first) are set for it. A CMD that fails, prints something else or runs past
    /// 10 s fails the stream (failed kind invalid_request); nothing is retried.
    #[arg(long, value_name = "CMD")]
    header_cmd: Option<String>,
    /// Send the JSON-RPC body (-d) as MCP's Streamable HTTP of this revision: 2025-11-25
    /// (MCP-Protocol-Version, Accept and Content-Type; a cut resumed with a GET and
    /// Last-Event-ID; give the session with -H Mcp-Session-Id) or 2026-07-28 (also Mcp-Method
    /// and Mcp-Name mirroring the body, the revision's params._meta added to it; a
    /// subscriptions/listen stream re-issued as a new request with a new JSON-RPC id, any other
    /// call never sent again). Either way the stream ends (ended why response) once the
    /// JSON-RPC response to the call arrived. -H and --resume win.
    #[arg(long, value_name = "REVISION")]
    mcp: Option<String>,
    /// Send through this HTTP proxy (`http://[user:pass@]host[:port]`), or `none` for no
    /// proxy (default: https_proxy, http_proxy, all_proxy and no_proxy from the environment,
    /// as curl reads them).
    #[arg(long, value_name = "URL|none")]
    proxy: Option<String>,
    /// With --proxy URL: hosts, domains, addresses and CIDR blocks reached directly
    /// (comma-separated, NO_PROXY's syntax).
    #[arg(long, value_name = "LIST", requires = "proxy")]
    no_proxy: Option<String>,
    /// Also trust the CA certificates in this PEM file (repeatable).
    #[arg(long, value_name = "FILE")]
    cacert: Vec<std::path::PathBuf>,
    /// Also trust the platform's root certificates (the system store), beside the built-in
    /// webpki roots.
    #[arg(long)]
    native_roots: bool,
}

/// Run `tether sse`.
///
/// # Errors
/// [`Failure::Usage`] for a bad URL or header; [`Failure::Failed`] when the server refuses
/// in a way retrying will not fix.
pub(crate) async fn run(args: Args) -> Result<(), Failure> {
    let (request, mcp) = build_request(&args)?;
    let mut config = EventSourceConfig::default();
    if let Some(idle) = args.idle_timeout {
        config.sse.idle_timeout = (!idle.is_zero()).then_some(idle);
    }
    config.seed = args.seed;
    config.http = http_options(&args)?;
    let header_cmd = args.header_cmd.clone();
    config.per_attempt = (mcp.is_some() || header_cmd.is_some()).then(|| {
        PerAttempt::fallible(move |info| {
            let headers = match &header_cmd {
                Some(cmd) => headers_from_command(cmd, info)?,
                None => Vec::new(),
            };
            let parts = AttemptParts::headers(headers);
            Ok(match mcp.as_ref().and_then(|m| m.body_for(info)) {
                Some(body) => parts.body(body),
                None => parts,
            })
        })
    });
    let state = args
        .state
        .clone()
        .map(|path| StateFile::new(path, "sse", vec![args.url.clone()]));
    let loaded = match &state {
        Some(state) => state.load()?,
        None => None,
    };
    let stop = stop_requested()?;
    let opened = match (&state, loaded) {
        (Some(state), Some(loaded)) => {
            let checkpoint = SseCheckpoint::from_json(&loaded.checkpoint)
                .map_err(|e| state.refuse(&e.to_string()))?;
            EventSource::restore(&args.url, request, config, &checkpoint).map_err(|e| match e {
                ConnectError::Checkpoint(_) => state.refuse(&e.to_string()),
                ConnectError::InvalidUrl(_) => Failure::Usage(e.to_string()),
                _ => Failure::Failed(e.to_string()),
            })
        }
        _ => EventSource::connect_request(&args.url, request, config).map_err(|e| match e {
            ConnectError::InvalidUrl(_) => Failure::Usage(e.to_string()),
            _ => Failure::Failed(e.to_string()),
        }),
    };
    let mut stream = opened?;
    let mut saves = tokio::time::interval(SAVE_EVERY);
    let mut dirty = false;
    let result = stream_lines(&args, &mut stream, stop, &state, &mut saves, &mut dirty).await;
    // Before the close: a stream still open is kept as one to resume, not one that ended.
    if let Some(state) = &state {
        state
            .store(&[], &stream.checkpoint().to_json())
            .map_err(|e| Failure::Failed(format!("--state not written: {e}")))?;
    }
    stream.close();
    result
}

/// How often `--state` is written while anything changes.
const SAVE_EVERY: Duration = Duration::from_secs(1);

/// Write the stream's events as lines until it ends or the run is stopped.
async fn stream_lines(
    args: &Args,
    stream: &mut EventSource,
    stop: impl std::future::Future<Output = ()>,
    state: &Option<StateFile>,
    saves: &mut tokio::time::Interval,
    dirty: &mut bool,
) -> Result<(), Failure> {
    let mut out = JsonLines::new();
    let mut peer_errors = Limiter::default();
    let mut stop = pin!(stop);
    let deadline = tokio::time::sleep(args.duration.unwrap_or(Duration::MAX / 4));
    let mut deadline = pin!(deadline);
    loop {
        let event = tokio::select! {
            biased;
            () = &mut stop => break,
            () = &mut deadline, if args.duration.is_some() => break,
            _ = saves.tick(), if *dirty && state.is_some() => {
                *dirty = false;
                if let Some(state) = state {
                    if let Err(error) = state.store(&[], &stream.checkpoint().to_json()) {
                        tracing::warn!(%error, "--state not written");
                    }
                }
                continue;
            }
            event = stream.next() => event,
        };
        *dirty = true;
        let Some(event) = event else {
            return Ok(());
        };
        let now = stream.now();
        let line = SseLine::new(&event, now, stream.last_event_id());
        if matches!(event, Event::ParseError(_) | Event::UnsendableId { .. }) {
            tracing::warn!(?event, "the server sent something wrong");
        }
        let failed = match &line {
            SseLine::Failed { reason, .. } => Some(format!("{}: {reason}", args.url)),
            _ => None,
        };
        if let Some(line) = line.admit(&mut peer_errors, now) {
            out.write(&line)?;
        }
        if let Some(why) = failed {
            return Err(Failure::Failed(why));
        }
        if matches!(event, Event::Ended { .. } | Event::Closed { .. }) {
            return Ok(());
        }
    }
    Ok(())
}

/// The request `args` describe: method, headers, body, resume policy, end rules.
///
/// # Errors
/// [`Failure::Usage`] for a bad header or method, or a body file that cannot be read.
fn build_request(args: &Args) -> Result<(Request, Option<Mcp>), Failure> {
    let body = match args.data.as_deref() {
        None => Vec::new(),
        Some(data) => match data.strip_prefix('@') {
            Some(path) => {
                std::fs::read(path).map_err(|e| Failure::Usage(format!("--data @{path}: {e}")))?
            }
            None => data.as_bytes().to_vec(),
        },
    };
    let method = match (&args.method, &args.data) {
        (Some(method), _) => method.clone(),
        (None, Some(_)) => "POST".to_owned(),
        (None, None) => "GET".to_owned(),
    };
    if reqwest::Method::from_bytes(method.as_bytes()).is_err() {
        return Err(Failure::Usage(format!("-X {method:?}: not an HTTP method")));
    }
    let mcp = match &args.mcp {
        Some(revision) => {
            Some(Mcp::new(revision, &body).map_err(|e| Failure::Usage(format!("--mcp {e}")))?)
        }
        None => None,
    };
    let mut request = Request::new(&method).body(body);
    for (name, value) in &parse_headers(&args.headers)? {
        // parse_headers accepted it as a header value; keep its text as given.
        let value = String::from_utf8_lossy(value.as_bytes());
        request = request.header(name.as_str(), &value);
    }
    if let Some(resume) = &args.resume {
        let resume: Resume = resume
            .parse()
            .map_err(|e| Failure::Usage(format!("--resume {e}")))?;
        request = request.resume(resume);
    }
    if let Some(data) = &args.end_data {
        request = request.end_on_data(data);
    }
    if let Some(event) = &args.end_event {
        request = request.end_on_event(event);
    }
    if let Some(event) = &args.fail_event {
        request = request.fail_on_event(event);
    }
    if let Some(mcp) = &mcp {
        request = mcp.apply(request, args.resume.is_some());
    }
    Ok((request, mcp))
}

/// The proxy and roots `--proxy`, `--no-proxy`, `--cacert` and `--native-roots` ask for.
///
/// # Errors
/// [`Failure::Usage`] for a `--cacert` file that cannot be read.
fn http_options(args: &Args) -> Result<HttpOptions, Failure> {
    let mut options = HttpOptions::default();
    options.proxy = match args.proxy.as_deref() {
        None => ProxyConfig::FromEnv,
        Some("none") => ProxyConfig::Direct,
        Some(url) => ProxyConfig::Url {
            url: url.to_owned(),
            no_proxy: args.no_proxy.clone(),
        },
    };
    // A proxy setting that cannot be used is the caller's to fix, whether flag or variable.
    Proxies::resolve(&options.proxy).map_err(|e| Failure::Usage(e.to_string()))?;
    options.roots = roots(&args.cacert, args.native_roots)?;
    Ok(options)
}

/// The roots `--cacert` and `--native-roots` ask for (`tether sse` and `tether req`).
///
/// # Errors
/// [`Failure::Usage`] for a `--cacert` file that cannot be read.
pub(crate) fn roots(cacert: &[std::path::PathBuf], native: bool) -> Result<Roots, Failure> {
    let mut roots = Roots::default();
    roots.native = native;
    for path in cacert {
        let pem = std::fs::read(path)
            .map_err(|e| Failure::Usage(format!("--cacert {}: {e}", path.display())))?;
        roots.extra_pem.push(pem);
    }
    Ok(roots)
}

/// Parse `-H 'Name: value'` arguments.
///
/// # Errors
/// [`Failure::Usage`] naming the first header that is not `Name: value`.
/// How long `--header-cmd` may run.
const HEADER_CMD_LIMIT: Duration = Duration::from_secs(10);

/// Run `cmd` for the attempt `info` describes and read its `Name: value` lines.
fn headers_from_command(cmd: &str, info: &AttemptInfo) -> Result<Vec<(String, String)>, String> {
    let child = std::process::Command::new("sh")
        .arg("-c")
        .arg(cmd)
        .env("TETHER_ATTEMPT", info.number.to_string())
        .env("TETHER_AFTER", info.after.map_or("", DropReason::as_str))
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::inherit())
        .spawn()
        .map_err(|e| format!("--header-cmd: {e}"))?;
    let pid = child.id();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    let output = match rx.recv_timeout(HEADER_CMD_LIMIT) {
        Ok(output) => output.map_err(|e| format!("--header-cmd: {e}"))?,
        Err(_) => {
            kill(pid);
            return Err(format!(
                "--header-cmd ran past {}s",
                HEADER_CMD_LIMIT.as_secs()
            ));
        }
    };
    if !output.status.success() {
        return Err(format!("--header-cmd exited with {}", output.status));
    }
    let text = String::from_utf8(output.stdout)
        .map_err(|_| "--header-cmd printed something that is not UTF-8".to_owned())?;
    let lines: Vec<String> = text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(str::to_owned)
        .collect();
    let headers = parse_headers(&lines).map_err(|f| match f {
        Failure::Usage(why) | Failure::Failed(why) => format!("--header-cmd: {why}"),
        Failure::StdoutClosed => "--header-cmd".to_owned(),
    })?;
    Ok(headers
        .iter()
        .map(|(name, value)| {
            (
                name.as_str().to_owned(),
                String::from_utf8_lossy(value.as_bytes()).into_owned(),
            )
        })
        .collect())
}

/// End a `--header-cmd` that ran too long.
fn kill(pid: u32) {
    #[cfg(unix)]
    {
        use rustix::process::{kill_process, Pid, Signal};
        if let Some(pid) = i32::try_from(pid).ok().and_then(Pid::from_raw) {
            let _ = kill_process(pid, Signal::KILL);
        }
    }
}

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
