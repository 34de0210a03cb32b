//! The `sse_session` target: an [`SseSim`] driven input by input, with its invariants checked
//! after every input.

use std::borrow::Cow;
use std::time::Duration;

use arbitrary::{Result, Unstructured};
use tether_core::backoff::BackoffPolicy;
use tether_core::link::{Epoch, SocketLoss};
use tether_core::sse::{Request, Resume, SseConfig};
use tether_core::Lifecycle;

use super::{short_string, MAX_OPS};
use crate::sse_sim::{Reply, ServerConfig, SseSim};

/// Drive an [`SseSim`] with up to [`MAX_OPS`] inputs decoded from `data` — its own server
/// model answering (or not), plus raw responses, body bytes (realistic and raw, header-unsafe
/// ids included), ends, errors, unbuildable requests, stale and never-issued epochs, time
/// steps that only move forward — with the simulator's invariants checked after every input.
///
/// # Panics
/// On any contract violation or panic in the session.
pub fn sse_session(data: &[u8]) {
    let mut u = Unstructured::new(data);
    let Ok((config, seed, server, request)) = sse_world(&mut u) else {
        return;
    };
    let mut s = SseSim::with_request(config, request, seed, server);
    s.keep_transcript(false);
    for _ in 0..MAX_OPS {
        if u.is_empty() {
            break;
        }
        if sse_step(&mut u, &mut s).is_err() {
            break;
        }
    }
}

fn sse_world(u: &mut Unstructured<'_>) -> Result<(SseConfig, u64, ServerConfig, Request)> {
    let mut config = SseConfig::default();
    config.reconnect = BackoffPolicy {
        max_attempts: if u.ratio(1, 3)? {
            Some(u.int_in_range(1..=4)?)
        } else {
            None
        },
        ..config.reconnect
    };
    config.stable_after = Duration::from_secs(u.int_in_range(0..=60)?);
    config.connect_timeout = Duration::from_secs(u.int_in_range(1..=60)?);
    config.idle_timeout = if u.ratio(1, 4)? {
        None
    } else {
        Some(Duration::from_secs(u.int_in_range(1..=120)?))
    };
    config.max_queued_events = u.int_in_range(1..=8)?;
    config.parser.max_line_len = u.int_in_range(1..=256)?;
    config.parser.max_event_len = u.int_in_range(1..=512)?;
    config.parser.max_queued = u.int_in_range(1..=4)?;
    config.parser.max_sendable_id_len = u.int_in_range(0..=16)?;
    let server = ServerConfig {
        latency: Duration::from_millis(u.int_in_range(0..=500)?),
        heartbeat_every: if u.arbitrary()? {
            Some(Duration::from_secs(u.int_in_range(1..=60)?))
        } else {
            None
        },
        ingress_idle_timeout: if u.arbitrary()? {
            Some(Duration::from_secs(u.int_in_range(1..=120)?))
        } else {
            None
        },
        publish_at: (0..u.int_in_range(0..=8)?)
            .map(|i| Ok(Duration::from_secs(i * 5 + u.int_in_range(0..=5)?)))
            .collect::<Result<_>>()?,
        answers: u.ratio(1, 2)?,
        ..ServerConfig::default()
    };
    let seed = u.arbitrary()?;
    // Last, so older corpus entries (which run out of bytes here) still decode to a GET.
    config.max_unsent_retries = u.int_in_range(0..=6)?;
    config.max_same_id_resumes = u.int_in_range(0..=12)?;
    config.max_error_body = u.int_in_range(0..=64)?;
    let request = sse_request(u)?;
    Ok((config, seed, server, request))
}

/// A GET (the most likely choice when the input ran out), or a POST with one of the resume
/// policies and end rules.
fn sse_request(u: &mut Unstructured<'_>) -> Result<Request> {
    let mut request = match u.int_in_range(0..=3)? {
        0 => return Ok(Request::get()),
        1 => Request::post("{}"),
        2 => Request::post("{}").resume(Resume::LastEventId {
            method: "GET".to_owned(),
        }),
        _ => Request::post("{}").resume(Resume::SameRequest),
    };
    if u.arbitrary()? {
        request = request.end_on_data("[DONE]");
    }
    if u.arbitrary()? {
        request = request.fail_on_event("error");
    }
    if u.arbitrary()? {
        request = request.repeatable(true);
    }
    Ok(request)
}

fn sse_step(u: &mut Unstructured<'_>, s: &mut SseSim) -> Result<()> {
    // Time only moves forward.
    let now = s.now() + Duration::from_millis(u.int_in_range(0..=2_000)?);
    let epoch = pick_epoch(u, s)?;
    match u.int_in_range(0..=11)? {
        0 => s.connect_at(now),
        1 => s.disconnect_at(now),
        2 | 3 => {
            let status = *u.choose(&[200, 200, 200, 204, 404, 408, 429, 500, 503, 301])?;
            let status = if u.ratio(1, 8)? {
                u.arbitrary()?
            } else {
                status
            };
            let content_type = content_type(u)?;
            let retry_after = if u.arbitrary()? {
                Some(Duration::from_secs(u.int_in_range(0..=1_000)?))
            } else {
                None
            };
            let _ = s.handle_response(now, epoch, status, content_type.as_deref(), retry_after);
        }
        4..=6 => {
            let bytes = body(u)?;
            // Offered until all are taken: each offer takes bytes or queues an event, which
            // the simulator drains, so this ends within one offer per byte and event.
            let mut rest: &[u8] = &bytes;
            let mut offers = 0;
            while let Ok(n) = s.handle_bytes(now, epoch, rest) {
                rest = &rest[n..];
                offers += 1;
                assert!(
                    offers <= 2 * bytes.len() + 2,
                    "handle_bytes made no progress"
                );
                if rest.is_empty() {
                    break;
                }
            }
        }
        7 => {
            let _ = s.handle_eof(now, epoch);
        }
        8 => {
            let loss = *u.choose(&[
                SocketLoss::ConnectionRefused,
                SocketLoss::TlsRejected,
                SocketLoss::HandshakeFailed,
                SocketLoss::NetworkError,
            ])?;
            let _ = s.handle_error(now, epoch, loss);
        }
        9 => {
            let detail = short_string(u)?;
            let _ = s.handle_request_invalid(now, epoch, &detail);
        }
        10 => {
            // The server model's own behaviour, with a scripted reply now and then.
            if u.ratio(1, 3)? {
                s.script([Reply::Body(body(u)?)]);
            }
            s.run_for(Duration::from_millis(u.int_in_range(0..=60_000)?));
        }
        // One in four timeouts is the application's lifecycle instead, or the stream
        // vanishing unannounced (drawn here so the other inputs keep their bytes).
        _ if u.ratio(1, 4)? => match u.int_in_range(0..=5)? {
            0 => s.lifecycle_at(now, Lifecycle::Suspended),
            1 => s.lifecycle_at(now, Lifecycle::Resumed),
            2 => {
                let old_path_gone = u.arbitrary()?;
                s.lifecycle_at(now, Lifecycle::NetworkChanged { old_path_gone });
            }
            3 => s.lifecycle_at(now, Lifecycle::Online(u.arbitrary()?)),
            4 => s.vanish(),
            _ => s.lifecycle_at(now, Lifecycle::Online(true)),
        },
        _ => {
            // A driver that slept to the deadline (or beyond) and passes a fresh `now`.
            let extra = Duration::from_millis(u.int_in_range(0..=3_000)?);
            s.handle_timeout(s.poll_timeout().unwrap_or(now).max(now) + extra);
        }
    }
    Ok(())
}

fn pick_epoch(u: &mut Unstructured<'_>, s: &SseSim) -> Result<Epoch> {
    let current = s.session().link().epoch().0;
    Ok(Epoch(match u.int_in_range(0..=7)? {
        0..=4 => current,
        5 => current.saturating_sub(1),
        6 => current + 1,
        _ => u.arbitrary()?,
    }))
}

fn content_type(u: &mut Unstructured<'_>) -> Result<Option<String>> {
    Ok(match u.int_in_range(0..=6)? {
        0..=2 => Some("text/event-stream".to_owned()),
        3 => Some(" Text/Event-Stream ; charset=utf-8".to_owned()),
        4 => Some("text/html".to_owned()),
        5 => None,
        _ => Some(short_string(u)?),
    })
}

fn body(u: &mut Unstructured<'_>) -> Result<Vec<u8>> {
    let n = u.int_in_range(1..=4)?;
    let mut out = Vec::new();
    for _ in 0..n {
        let piece: Cow<'static, [u8]> = match u.int_in_range(0..=10)? {
            0 => b"data: hello\n\n".as_slice().into(),
            1 => b": heartbeat\n\n".as_slice().into(),
            2 => format!(
                "id: {}\nevent: change\ndata: {{}}\n\n",
                u.arbitrary::<u16>()?
            )
            .into_bytes()
            .into(),
            3 => format!("retry: {}\n", u.arbitrary::<u32>()?)
                .into_bytes()
                .into(),
            4 => b"data: "
                .iter()
                .chain([b'x'; 300].iter())
                .copied()
                .collect::<Vec<_>>()
                .into(),
            5 => b"\xEF\xBB\xBFdata: bom\r\n\r\n".as_slice().into(),
            6 => b"\r".as_slice().into(),
            7 => {
                // An id a header cannot carry (a control byte or DEL), or a long one.
                let bad = *u.choose(&[0x01u8, 0x08, 0x0B, 0x1F, 0x7F, b'x'])?;
                let len = u.int_in_range(0..=20)?;
                let mut id = b"id: a".to_vec();
                id.extend(std::iter::repeat_n(bad, len));
                id.extend_from_slice(b"\ndata: d\n\n");
                id.into()
            }
            _ => {
                let len = u.int_in_range(0..=64)?;
                u.bytes(len)?.to_vec().into()
            }
        };
        out.extend_from_slice(&piece);
    }
    Ok(out)
}
