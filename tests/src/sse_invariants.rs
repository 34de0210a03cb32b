//! [`SseInvariants`]: the [`SseSession`] driving contract, checked around every input. One
//! definition shared by the SSE simulator (every transcript test), the `sse_session` fuzz
//! target and its corpus replay.
//!
//! What it holds the session to:
//!
//! - its internal bookkeeping agrees with itself (the core's `check_consistency`);
//! - queued output makes `poll_timeout` return `now`; after `handle_timeout(now)` with nothing
//!   queued the next deadline is later than `now` (STYLE 4);
//! - an input answered with [`SocketError`](tether_core::link::SocketError) (local misuse) queues
//!   nothing;
//! - at most two transmits and two status events per input, at most
//!   `max_queued_events` parsed events (plus one: a message and its unsendable-id notice
//!   can come from one blank line), no message larger than the parser allows;
//! - a request's `Last-Event-ID` is a valid header value (no control character but TAB, no
//!   DEL) of at most `max_sendable_id_len` bytes;
//! - request epochs only grow, and each request is aborted at most once;
//! - retry safety (issue 18): once a request that is not repeatable opened, it is never sent
//!   again before the next `connect` unless its policy is [`Resume::SameRequest`]; only the
//!   resume request may follow;
//! - after `disconnect`, `Failed`, `Closed` or `Ended` nothing at all happens until `connect`:
//!   no request, no event, no deadline.

use std::collections::BTreeSet;

use tether_core::link::Epoch;
use tether_core::sse::{Attempt, Event, Resume, SseConfig, SseSession, Transmit};
use tether_core::Instant;

/// The kind of input the session was just given.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SseInput {
    /// `connect`.
    Connect,
    /// `disconnect`.
    Disconnect,
    /// `handle_response`, `handle_bytes`, `handle_eof` or `handle_error` that returned `Ok`.
    Peer,
    /// Any `handle_*` call that returned a `SocketError`.
    Misuse,
    /// `handle_timeout`.
    Timeout,
    /// `suspend`, `resume`, `network_changed` or `set_online`.
    Lifecycle,
}

/// What the checker remembers between inputs.
#[derive(Debug)]
pub struct SseInvariants {
    max_events: usize,
    max_id: usize,
    max_data: usize,
    /// After `disconnect`, `Failed` or `Closed`, until `connect`.
    stopped: bool,
    newest_open: Option<Epoch>,
    aborted: BTreeSet<Epoch>,
    /// The application's request opened since the last `connect`.
    accepted: bool,
    /// The session's request may be sent again once accepted.
    may_repeat: bool,
    /// The session's policy is `Resume::Reissue`.
    reissues: bool,
    /// A session restored from a checkpoint whose request the server had accepted: true
    /// from its first `connect` on.
    restored_accepted: Option<bool>,
}

/// Everything one input made the session say, in order.
#[derive(Debug, Default)]
pub struct SseOutputs {
    /// The transmits.
    pub transmits: Vec<Transmit>,
    /// The events.
    pub events: Vec<Event>,
}

impl SseInvariants {
    /// A checker for a fresh session running `config`.
    pub fn new(config: &SseConfig) -> Self {
        SseInvariants {
            max_events: config.max_queued_events,
            max_id: config.parser.max_sendable_id_len,
            // Invalid UTF-8 becomes U+FFFD: one byte can decode to three.
            max_data: config.parser.max_event_len.saturating_mul(3),
            stopped: true,
            newest_open: None,
            aborted: BTreeSet::new(),
            accepted: false,
            may_repeat: true,
            reissues: false,
            restored_accepted: None,
        }
    }

    /// The session was restored from a checkpoint saying whether the server had accepted its
    /// request: its first `connect` goes on from there.
    pub fn restored(&mut self, accepted: bool) {
        self.restored_accepted = Some(accepted);
    }

    /// Drain `session` after `input` at `now` (the newest time it was given), checking the
    /// contract on the way.
    ///
    /// # Errors
    /// A description of the first violation.
    pub fn drain(
        &mut self,
        now: Instant,
        input: SseInput,
        session: &mut SseSession,
    ) -> Result<SseOutputs, String> {
        session.check_consistency()?;
        let request = session.request();
        self.may_repeat = request.repeatable || request.resume == Resume::SameRequest;
        self.reissues = matches!(request.resume, Resume::Reissue { .. });
        let queued = session.poll_timeout();
        let mut out = SseOutputs::default();
        while let Some(t) = session.poll_transmit() {
            out.transmits.push(t);
        }
        while let Some(e) = session.poll_event() {
            out.events.push(e);
        }
        let any = !out.transmits.is_empty() || !out.events.is_empty();
        if any && queued != Some(now) {
            return Err(format!(
                "output queued but poll_timeout {queued:?} != {now:?}"
            ));
        }
        if any && input == SseInput::Misuse {
            return Err(format!("local misuse queued output {out:?}"));
        }
        if any && self.stopped && input != SseInput::Connect {
            return Err(format!("{input:?} while stopped queued {out:?}"));
        }
        if input == SseInput::Connect {
            self.accepted = self.restored_accepted.take().unwrap_or(false);
        }
        self.check_transmits(&out.transmits)?;
        self.check_events(&out.events)?;
        check_end(&out)?;
        if out.events.iter().any(|e| matches!(e, Event::Open)) {
            self.accepted = true;
        }
        match input {
            SseInput::Connect => self.stopped = false,
            SseInput::Disconnect => self.stopped = true,
            _ => {}
        }
        if out.events.iter().any(|e| {
            matches!(
                e,
                Event::Failed { .. } | Event::Closed { .. } | Event::Ended { .. }
            )
        }) {
            if out
                .transmits
                .iter()
                .any(|t| matches!(t, Transmit::Open { .. }))
            {
                return Err(format!("a request in the same step as the end: {out:?}"));
            }
            self.stopped = true;
        }
        let next = session.poll_timeout();
        if input == SseInput::Timeout && next.is_some_and(|t| t <= now) {
            return Err(format!(
                "after handle_timeout({now:?}) with nothing queued, poll_timeout is {next:?}"
            ));
        }
        if self.stopped && next.is_some() {
            return Err(format!("stopped, but poll_timeout is {next:?}"));
        }
        Ok(out)
    }

    fn check_transmits(&mut self, transmits: &[Transmit]) -> Result<(), String> {
        if transmits.len() > 2 {
            return Err(format!("{} transmits from one input", transmits.len()));
        }
        for t in transmits {
            match *t {
                Transmit::Open {
                    epoch,
                    ref redirect,
                    ..
                } if redirect.is_some() => {
                    // A hop goes on with the attempt: its epoch, never an aborted one.
                    if self.newest_open != Some(epoch) || self.aborted.contains(&epoch) {
                        return Err(format!(
                            "redirect hop {epoch:?} is not the live attempt {:?}",
                            self.newest_open
                        ));
                    }
                }
                Transmit::Open {
                    epoch,
                    ref last_event_id,
                    attempt,
                    ..
                } => {
                    if attempt == Attempt::Reissue && !(self.accepted && self.reissues) {
                        return Err(format!(
                            "request {epoch:?} re-issued without the Reissue policy or before \
                             the server accepted the request"
                        ));
                    }
                    if attempt == Attempt::Original && self.accepted && !self.may_repeat {
                        return Err(format!(
                            "request {epoch:?} sends a request that is not repeatable again \
                             after it was accepted"
                        ));
                    }
                    if let Some(id) = last_event_id {
                        let header_safe =
                            id.bytes().all(|b| b == b'\t' || (b >= 0x20 && b != 0x7F));
                        if !header_safe || id.len() > self.max_id || id.is_empty() {
                            return Err(format!("request {epoch:?} carries Last-Event-ID {id:?}"));
                        }
                    }
                    if self.newest_open.is_some_and(|n| epoch <= n) {
                        return Err(format!("request {epoch:?} after {:?}", self.newest_open));
                    }
                    self.newest_open = Some(epoch);
                }
                Transmit::Close { epoch } => {
                    if self.newest_open.is_none_or(|n| epoch > n) {
                        return Err(format!("abort of {epoch:?}, never requested"));
                    }
                    if !self.aborted.insert(epoch) {
                        return Err(format!("{epoch:?} aborted twice"));
                    }
                }
                // Checked against the events in `check_end`.
                Transmit::End => {}
            }
        }
        Ok(())
    }

    fn check_events(&self, events: &[Event]) -> Result<(), String> {
        let parsed = events
            .iter()
            .filter(|e| {
                matches!(
                    e,
                    Event::Message(_) | Event::ParseError(_) | Event::UnsendableId { .. }
                )
            })
            .count();
        let notices = events
            .iter()
            .filter(|e| matches!(e, Event::UnsendableId { .. }))
            .count();
        if parsed - notices > self.max_events || parsed > self.max_events + 1 {
            return Err(format!("{parsed} parsed events > {}", self.max_events));
        }
        if events.len() - parsed > 2 {
            return Err(format!(
                "{} status events from one input",
                events.len() - parsed
            ));
        }
        for e in events {
            match e {
                Event::Message(m) if m.data.len() > self.max_data => {
                    return Err(format!("message of {} bytes", m.data.len()));
                }
                Event::Reconnecting { attempt: 0, .. } => {
                    return Err("reconnecting at attempt 0".to_owned());
                }
                _ => {}
            }
        }
        Ok(())
    }
}

/// The core says a stream is over ([`Transmit::End`]) exactly when it queues the event that
/// says why, and that event is the last.
fn check_end(out: &SseOutputs) -> Result<(), String> {
    let last_word = |e: &Event| {
        matches!(
            e,
            Event::Failed { .. } | Event::Closed { .. } | Event::Ended { .. }
        )
    };
    let ends = out
        .transmits
        .iter()
        .filter(|t| matches!(t, Transmit::End))
        .count();
    let words = out.events.iter().filter(|e| last_word(e)).count();
    if ends != words {
        return Err(format!(
            "{ends} end transmits for {words} final events: {out:?}"
        ));
    }
    if words > 0 && !out.events.last().is_some_and(last_word) {
        return Err(format!("an event after the final one: {out:?}"));
    }
    Ok(())
}
