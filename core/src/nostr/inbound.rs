//! The relay's frames as a session acts on them: decoded within `max_frame` and, when a
//! frame names a subscription, routed by its wire id to that subscription's current
//! attempt. What cannot be acted on is counted in [`Stats`], not surfaced: a wire id the
//! session never sent or no longer has (`unknown_subscription`), an earlier attempt's, or an
//! EVENT or CLOSED for a REQ no longer open (`stale_attempt`), a NIP-77 frame for a
//! subscription with no NIP-77 session open, a verb this client never asks for (COUNT:
//! `unexpected`). A frame that does not decode is the one peer error: the caller surfaces
//! it. What each routed frame then does is the session's (`session/frames.rs`).

use std::borrow::Cow;

use crate::nostr::message::{EventId, FrameError, RawEvent, RelayMessage};
use crate::nostr::registry::Registry;
use crate::nostr::stats::Stats;
use crate::nostr::subscription::{parse_neg_wire_id, parse_wire_id, Subscription, SubscriptionId};

/// A relay frame the session acts on, its subscription (if it names one) routed.
#[derive(Debug)]
pub(crate) enum Frame<'a> {
    /// An event for an open REQ.
    Event {
        sub: SubscriptionId,
        event: RawEvent<'a>,
    },
    /// End of stored events, for the current attempt.
    Eose { sub: SubscriptionId },
    /// The relay ended or refused an open REQ.
    Closed {
        sub: SubscriptionId,
        message: Cow<'a, str>,
    },
    /// The answer to a published EVENT or to our AUTH.
    Ok {
        event: EventId,
        accepted: bool,
        message: Cow<'a, str>,
    },
    /// A notice, tied to no subscription.
    Notice { message: Cow<'a, str> },
    /// A NIP-42 challenge.
    Auth { challenge: Cow<'a, str> },
    /// The relay's next NIP-77 message, for a subscription with a session open.
    NegMsg {
        sub: SubscriptionId,
        message: Cow<'a, str>,
    },
    /// The relay ended a NIP-77 session that was open.
    NegErr {
        sub: SubscriptionId,
        message: Cow<'a, str>,
    },
}

/// Read one text frame: `Ok(None)` when there is nothing to act on (counted in `stats`).
///
/// # Errors
/// The [`FrameError`] of a frame that does not decode (counted as `malformed`).
#[inline]
pub(crate) fn read<'a>(
    text: &'a str,
    max_frame: usize,
    subs: &Registry,
    stats: &mut Stats,
) -> Result<Option<Frame<'a>>, FrameError> {
    stats.frames += 1;
    let message = RelayMessage::decode(text, max_frame).inspect_err(|_| stats.malformed += 1)?;
    let mut route = Route { subs, stats };
    Ok(match message {
        RelayMessage::Event { sub, event } => {
            route.open(&sub).map(|sub| Frame::Event { sub, event })
        }
        RelayMessage::Eose { sub } => route.current(&sub).map(|sub| Frame::Eose { sub }),
        RelayMessage::Closed { sub, message } => {
            route.open(&sub).map(|sub| Frame::Closed { sub, message })
        }
        RelayMessage::Ok {
            event_id,
            accepted,
            message,
        } => Some(Frame::Ok {
            event: event_id,
            accepted,
            message,
        }),
        RelayMessage::Notice { message } => Some(Frame::Notice { message }),
        RelayMessage::Auth { challenge } => Some(Frame::Auth { challenge }),
        RelayMessage::Count { .. } => {
            stats.unexpected += 1;
            None
        }
        RelayMessage::NegMsg { sub, message } => route
            .negotiating(&sub)
            .map(|sub| Frame::NegMsg { sub, message }),
        RelayMessage::NegErr { sub, message } => route
            .negotiating(&sub)
            .map(|sub| Frame::NegErr { sub, message }),
    })
}

/// Wire ids to subscriptions, counting what does not route.
struct Route<'s> {
    subs: &'s Registry,
    stats: &'s mut Stats,
}

impl<'s> Route<'s> {
    /// The subscription whose current attempt `wire` names.
    fn current(&mut self, wire: &str) -> Option<SubscriptionId> {
        self.attempt(wire).map(|sub| sub.id)
    }

    /// [`Route::current`], for a REQ still open on the relay.
    fn open(&mut self, wire: &str) -> Option<SubscriptionId> {
        let sub = self.attempt(wire)?;
        if !sub.state.is_open() {
            self.stats.stale_attempt += 1;
            return None;
        }
        Some(sub.id)
    }

    fn attempt(&mut self, wire: &str) -> Option<&'s Subscription> {
        let Some((id, attempt)) = parse_wire_id(wire) else {
            self.stats.unknown_subscription += 1;
            return None;
        };
        let Some(sub) = self.subs.get(id) else {
            self.stats.unknown_subscription += 1;
            return None;
        };
        if sub.attempt != attempt {
            self.stats.stale_attempt += 1;
            return None;
        }
        Some(sub)
    }

    /// The subscription whose current attempt has the NIP-77 session `wire` names open.
    fn negotiating(&mut self, wire: &str) -> Option<SubscriptionId> {
        let found = parse_neg_wire_id(wire).and_then(|(id, attempt, filter)| {
            self.subs
                .get(id)
                .filter(|s| {
                    s.attempt == attempt
                        && s.catch_up.negotiating()
                        && s.catch_up.reconciling() == Some(filter)
                })
                .map(|_| id)
        });
        if found.is_none() {
            self.stats.unknown_subscription += 1;
        }
        found
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nostr::message::DEFAULT_MAX_FRAME;
    use crate::nostr::subscription::{wire_id, Filter, Priority, SubState};

    const EVENT: &str = r#"{"id":"5c83da77af1dec6d7289834998ad7aafbd9e2191396d75ec3cc27f5a77226f36","pubkey":"f7234bd4c1394dda46d09f35bd384dd30cc552ad5541990f98844fb06676e9ca","created_at":1710000000,"kind":1,"tags":[],"content":"gm","sig":"908a15e46fb4d8675bab026fc230a0e3542bfade63da02d542fb78b2a8513fcd0092619a2c8c1221e581946e0191f2af505dfdf8657a414dbca329186f009262"}"#;

    /// A registry with one subscription on attempt 2, in `state`.
    fn one(state: SubState) -> (Registry, SubscriptionId) {
        let mut subs = Registry::default();
        let filters = [Filter::new(r#"{"kinds":[1]}"#).expect("filter")];
        let id = subs.insert(|id| Subscription::new(id, &filters, Priority::default(), 1));
        let sub = subs.get_mut(id).expect("just inserted");
        sub.attempt = 2;
        sub.state = state;
        (subs, id)
    }

    fn read_all(texts: &[String], subs: &Registry) -> (Vec<String>, Stats) {
        let mut stats = Stats::default();
        let read = texts
            .iter()
            .map(|t| match read(t, DEFAULT_MAX_FRAME, subs, &mut stats) {
                Ok(Some(frame)) => label(&frame),
                Ok(None) => "none".to_owned(),
                Err(e) => format!("error {e}"),
            })
            .collect();
        (read, stats)
    }

    /// The verb and the subscription a frame was routed to.
    fn label(frame: &Frame<'_>) -> String {
        match frame {
            Frame::Event { sub, .. } => format!("event {sub:?}"),
            Frame::Eose { sub } => format!("eose {sub:?}"),
            Frame::Closed { sub, .. } => format!("closed {sub:?}"),
            Frame::NegMsg { sub, .. } => format!("neg-msg {sub:?}"),
            Frame::NegErr { sub, .. } => format!("neg-err {sub:?}"),
            other => format!("{other:?}"),
        }
    }

    #[test]
    fn events_route_to_the_current_attempt_of_an_open_req_and_the_rest_is_counted() {
        let (subs, id) = one(SubState::Pending);
        let texts = [
            format!(r#"["EVENT","{}",{EVENT}]"#, wire_id(id, 2)),
            format!(r#"["EVENT","{}",{EVENT}]"#, wire_id(id, 1)),
            format!(r#"["EVENT","{}",{EVENT}]"#, wire_id(SubscriptionId(99), 2)),
            format!(r#"["EVENT","nonsense",{EVENT}]"#),
            format!(r#"["CLOSED","{}","error: x"]"#, wire_id(id, 2)),
            r#"["COUNT","a",{"count":3}]"#.to_owned(),
            r#"["EVENT""#.to_owned(),
        ];
        let (read, stats) = read_all(&texts, &subs);
        assert_eq!(read[0], format!("event {id:?}"));
        assert_eq!(&read[1..4], ["none", "none", "none"]);
        assert_eq!(read[4], format!("closed {id:?}"));
        assert_eq!(read[5], "none");
        assert!(read[6].starts_with("error "), "{}", read[6]);
        assert_eq!(
            (
                stats.frames,
                stats.stale_attempt,
                stats.unknown_subscription
            ),
            (7, 1, 2)
        );
        assert_eq!((stats.unexpected, stats.malformed), (1, 1));
    }

    #[test]
    fn a_req_no_longer_open_gets_no_event_or_closed_but_its_eose_is_routed() {
        let (subs, id) = one(SubState::Retrying);
        let wire = wire_id(id, 2);
        let texts = [
            format!(r#"["EVENT","{wire}",{EVENT}]"#),
            format!(r#"["CLOSED","{wire}","error: x"]"#),
            format!(r#"["EOSE","{wire}"]"#),
        ];
        let (read, stats) = read_all(&texts, &subs);
        assert_eq!(read, ["none", "none", &format!("eose {id:?}")]);
        assert_eq!(stats.stale_attempt, 2);
    }

    #[test]
    fn nip77_frames_route_only_to_an_open_negentropy_session() {
        let (subs, id) = one(SubState::Live);
        let texts = [
            format!(r#"["NEG-MSG","n{}","6100"]"#, wire_id(id, 2)),
            format!(r#"["NEG-ERR","{}","closed: x"]"#, wire_id(id, 2)),
        ];
        let (read, stats) = read_all(&texts, &subs);
        assert_eq!(read, ["none", "none"]);
        assert_eq!(stats.unknown_subscription, 2);
    }
}
