//! The resume policy: whether a lost stream may be sent again, and as what
//! (`Resumes::after_drop`); and which last event IDs can be sent back as a
//! `Last-Event-ID` header ([`check_sendable`](crate::sse::parser::check_sendable), the
//! parser's rule), one rule for every driver.
//!
//! # Sending again
//!
//! Before the server accepted the request (no stream opened since `connect`), a repeatable
//! request (or one whose policy is [`Resume::SameRequest`]) goes again; one that is not goes
//! again only when the loss proves the server never acted on it (refused, TLS, a retryable
//! status), at most [`SseConfig::max_unsent_retries`] times. After it was accepted, the
//! request's [`Resume`] policy decides: `SameRequest` sends it again, `Never` ends (with
//! [`Event::Ended`] at a clean EOF when no end rule exists), `LastEventId` resumes from the
//! newest sendable id with a bound on failures from one id and a floor that grows with them.
//!
//! # Which ids can be sent
//!
//! WHATWG accepts any `id` without NUL as the last event ID, but an HTTP header value cannot
//! carry every byte. Both HTTP clients the adapters use (reqwest, and hyper through the
//! `http` crate's `HeaderValue`) refuse a value holding a control character other than TAB,
//! or DEL, and the request then fails before a byte reaches the server. Left to the driver,
//! such an id made every reconnect fail as if the network had, forever.
//!
//! An id is *sendable* when every byte of its UTF-8 encoding is HTAB, a visible ASCII
//! character or SP (0x20–0x7E), or at least 0x80 (RFC 9110's obs-text, which `HeaderValue`
//! accepts and hyper writes as it is, so non-ASCII ids survive), and it is at most
//! [`ParserConfig::max_sendable_id_len`](crate::sse::ParserConfig::max_sendable_id_len)
//! bytes long (servers and proxies refuse oversized header lines: nginx's default limit is
//! 8 KiB per line, and a refusal would end the stream with a 4xx).
//!
//! The parser keeps WHATWG's last event ID (messages carry it unchanged) and, beside it, the
//! newest *sendable* one, which is what a reconnect resumes from: the server replays from an
//! older point rather than from nothing, so delivery stays at-least-once instead of losing
//! the events in the gap.

use std::time::Duration;

use crate::link::SocketLoss;
use crate::sse::output::{DropReason, EndReason, Event, FailReason};
use crate::sse::request::{Progress, Request, Resume};
use crate::sse::SseConfig;

/// What the resume policy remembers of one run of a stream (reset by `connect`).
#[derive(Clone, Debug, Default)]
pub(crate) struct Resumes {
    /// Times a request that is not repeatable went out again before it was accepted.
    unsent_retries: u32,
    /// The `Last-Event-ID` of the latest resume, and how many resumes with it failed in a row.
    streak: (String, u32),
    /// Re-issues in a row that did not open a stream.
    reissue_failures: u32,
}

/// What to do after a stream or attempt was lost.
pub(crate) enum AfterDrop {
    /// Send again, no sooner than this.
    Retry(Duration),
    /// Stop: this is the last event.
    Stop(Event),
}

/// What the policy is told about a loss.
pub(crate) struct Dropped<'a> {
    /// The application's request.
    pub(crate) request: &'a Request,
    /// A stream of it opened since `connect`: the server has it.
    pub(crate) accepted: bool,
    /// Why it was lost.
    pub(crate) why: DropReason,
    /// The lost attempt had opened its stream (a cut, not a refused attempt).
    pub(crate) opened: bool,
    /// The newest sendable last event id (empty: none).
    pub(crate) resume_id: &'a str,
    /// How far the stream got, for a final event.
    pub(crate) progress: Progress,
    /// The session's numbers.
    pub(crate) config: &'a SseConfig,
}

impl Resumes {
    /// Whether anything may be sent again after this loss, by the rules in the module docs.
    /// Counts the attempt against its limit when it may.
    pub(crate) fn after_drop(&mut self, lost: Dropped<'_>) -> AfterDrop {
        let Dropped {
            request,
            accepted,
            why,
            opened,
            resume_id,
            progress,
            config,
        } = lost;
        if !accepted {
            return self.before_accepted(request, why, progress, config);
        }
        match &request.resume {
            Resume::SameRequest => AfterDrop::Retry(Duration::ZERO),
            Resume::Never => {
                AfterDrop::Stop(if why == DropReason::Eof && !request.end.defines_end() {
                    Event::Ended {
                        why: EndReason::Eof,
                        progress,
                    }
                } else {
                    failed(FailReason::Interrupted { why, progress })
                })
            }
            Resume::LastEventId { .. } => self.resume(resume_id, why, progress, config),
            Resume::Reissue { max_failures } => self.reissue(*max_failures, opened, why, progress),
        }
    }

    /// Requests sent since the last cut of a re-issued stream, the latest included.
    pub(crate) fn reissues_since_cut(&self) -> u32 {
        self.reissue_failures.saturating_add(1)
    }

    /// After a cut, re-issue; count the re-issues that do not open, up to `max_failures`.
    fn reissue(
        &mut self,
        max_failures: u32,
        opened: bool,
        why: DropReason,
        progress: Progress,
    ) -> AfterDrop {
        if opened {
            self.reissue_failures = 0;
            return AfterDrop::Retry(Duration::ZERO);
        }
        self.reissue_failures = self.reissue_failures.saturating_add(1);
        if self.reissue_failures > max_failures {
            return AfterDrop::Stop(failed(FailReason::ReissueExhausted { why, progress }));
        }
        AfterDrop::Retry(Duration::ZERO)
    }

    fn before_accepted(
        &mut self,
        request: &Request,
        why: DropReason,
        progress: Progress,
        config: &SseConfig,
    ) -> AfterDrop {
        if request.repeatable || request.resume == Resume::SameRequest {
            return AfterDrop::Retry(Duration::ZERO);
        }
        if !never_reached_server(why) {
            return AfterDrop::Stop(failed(FailReason::Interrupted { why, progress }));
        }
        self.unsent_retries = self.unsent_retries.saturating_add(1);
        if self.unsent_retries > config.max_unsent_retries {
            return AfterDrop::Stop(failed(FailReason::Exhausted(why)));
        }
        AfterDrop::Retry(Duration::ZERO)
    }

    fn resume(
        &mut self,
        id: &str,
        why: DropReason,
        progress: Progress,
        config: &SseConfig,
    ) -> AfterDrop {
        if id.is_empty() {
            // Nothing to resume from, and the request itself may not go again.
            return AfterDrop::Stop(failed(FailReason::Interrupted { why, progress }));
        }
        if self.streak.0 == id {
            self.streak.1 = self.streak.1.saturating_add(1);
        } else {
            self.streak = (id.to_owned(), 0);
        }
        let failures = self.streak.1;
        if failures >= config.max_same_id_resumes {
            return AfterDrop::Stop(failed(FailReason::ResumeExhausted { why, progress }));
        }
        // A resume that opens and drops at once never looks unstable to the link if the
        // server keeps it up past `stable_after`; the streak keeps the delays growing anyway
        // (rmcp's 1 Hz loop on one Last-Event-ID).
        let floor = match failures {
            0 => Duration::ZERO,
            n => config.reconnect.min_delay(n.saturating_add(1)),
        };
        AfterDrop::Retry(floor)
    }
}

fn failed(why: FailReason) -> Event {
    Event::Failed { why }
}

/// Whether a loss before the response head proves the request never reached the server: the
/// connection was never made (refused, TLS), or the server answered with a status saying it
/// did not act on it (408, 429, 5xx).
fn never_reached_server(why: DropReason) -> bool {
    matches!(
        why,
        DropReason::Status(_)
            | DropReason::NetworkError(SocketLoss::ConnectionRefused | SocketLoss::TlsRejected)
    )
}
