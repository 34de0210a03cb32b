//! `tether req <RELAY> <RELAY>... [FILTER_JSON ...]`: one subscription per filter across
//! every relay, through the core's relay pool. Each event is written once, with the relay
//! that delivered it first; every line about one relay says which; each subscription ends
//! its query with exactly one `complete` line (`complete` or `partial`, and who is missing).

use std::collections::BTreeMap;
use std::pin::pin;
use std::time::Duration;

use futures_util::stream::{select_all, StreamExt};
use serde::Serialize;
use serde_json::value::RawValue;
use tether_tokio::tether_core::nostr::Filter;
use tether_tokio::{
    Config, Lifecycle, Outcome, PoolConfig, PoolItem, RelayId, SessionEvent, SubscriptionEvent,
};

use crate::output::{disconnect_why, is_zero, millis, raw_json, JsonLines};
use crate::rate_limit::{self, RateLimit, PEER_ERRORS_PER_SECOND};
use crate::{stop_requested, Failure};

/// What the pool run needs from `tether req`'s arguments.
pub(crate) struct PoolArgs {
    pub(crate) relays: Vec<String>,
    pub(crate) filters: Vec<Filter>,
    pub(crate) config: Config,
    pub(crate) until_eose: bool,
    pub(crate) duration: Option<Duration>,
    pub(crate) eose_timeout: Option<Duration>,
}

/// One line of `tether req` output with several relays.
#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Line<'a> {
    Connected {
        relay: &'a str,
    },
    Disconnected {
        relay: &'a str,
        reconnect_in_ms: Option<u64>,
        why: &'static str,
        #[serde(skip_serializing_if = "Option::is_none")]
        close_code: Option<u16>,
    },
    Invalid {
        sub: &'a str,
        relay: &'a str,
        id: String,
        reason: &'a str,
    },
    Event {
        sub: &'a str,
        relay: &'a str,
        event: &'a RawValue,
    },
    Eose {
        sub: &'a str,
        relay: &'a str,
    },
    CaughtUp {
        sub: &'a str,
        relay: &'a str,
        method: &'static str,
        exact_since: u64,
        recovered: u64,
    },
    Retrying {
        sub: &'a str,
        relay: &'a str,
        in_ms: u64,
        attempt: u32,
    },
    Queued {
        sub: &'a str,
        relay: &'a str,
    },
    EoseTimeout {
        sub: &'a str,
        relay: &'a str,
    },
    Closed {
        sub: &'a str,
        relay: &'a str,
        reason: &'a str,
        attempts: u32,
    },
    Complete {
        sub: &'a str,
        outcome: &'static str,
        missing: Vec<&'a str>,
    },
    Ended {
        sub: &'a str,
    },
    Notice {
        relay: &'a str,
        message: &'a str,
    },
    Auth {
        relay: &'a str,
        challenge: &'a str,
    },
    Authenticated {
        relay: &'a str,
    },
    AuthFailed {
        relay: &'a str,
        reason: &'a str,
    },
    SignerFailed {
        relay: &'a str,
        error: String,
    },
    RateLimited {
        relay: &'a str,
        window_ms: u64,
    },
    SubscriptionLimit {
        relay: &'a str,
        max: usize,
    },
    PeerError {
        relay: &'a str,
        kind: &'static str,
        excerpt: String,
        #[serde(skip_serializing_if = "is_zero")]
        suppressed: u64,
    },
}

/// Run `tether req` over several relays.
///
/// # Errors
/// [`Failure::Usage`] for a bad URL; [`Failure::Failed`] when the pool driver stops.
pub(crate) async fn run(args: PoolArgs) -> Result<(), Failure> {
    let mut pool_config = PoolConfig::default();
    pool_config.relay = args.config.relay.clone();
    if let Some(deadline) = args.eose_timeout {
        pool_config.eose_deadline = deadline;
    }
    let stop = stop_requested()?;
    let pool = tether_tokio::pool(pool_config, args.config);
    let Some(mut relay_events) = pool.events() else {
        return Err(Failure::Failed("pool events already taken".into()));
    };
    let mut urls = BTreeMap::new();
    for url in &args.relays {
        let relay = pool
            .add_relay(url)
            .await
            .map_err(|e| Failure::Usage(e.to_string()))?;
        urls.insert(relay, url.clone());
    }
    let mut streams = Vec::with_capacity(args.filters.len());
    for (index, filter) in args.filters.into_iter().enumerate() {
        let sub = pool
            .subscribe(vec![filter])
            .await
            .map_err(|e| Failure::Failed(format!("subscribe: {e}")))?;
        streams.push(sub.map(move |item| (index, item)));
    }
    let mut run = Run {
        out: JsonLines::new(),
        urls,
        complete: vec![false; streams.len()],
        peer_errors: RateLimit::new(PEER_ERRORS_PER_SECOND, Duration::from_secs(1)),
    };
    let mut items = select_all(streams);
    let mut stop = pin!(stop);
    let mut continued = crate::Continued::install()?;
    let deadline = tokio::time::sleep(args.duration.unwrap_or(Duration::MAX / 4));
    let mut deadline = pin!(deadline);
    loop {
        tokio::select! {
            biased;
            () = &mut stop => break,
            () = &mut deadline, if args.duration.is_some() => break,
            () = continued.next() => {
                if pool.lifecycle(Lifecycle::Resumed).await.is_err() {
                    return Err(Failure::Failed("the pool driver stopped".into()));
                }
            }
            event = relay_events.next() => {
                let Some((relay, event)) = event else {
                    return Err(Failure::Failed("the pool driver stopped".into()));
                };
                run.relay_event(relay, &event)?;
            }
            item = items.next() => {
                let Some((index, item)) = item else {
                    // Every subscription ended: nothing left to stream.
                    break;
                };
                run.item(index, &item)?;
                if args.until_eose && run.complete.iter().all(|&c| c) {
                    break;
                }
            }
        }
    }
    let _ = pool.close().await;
    Ok(())
}

struct Run {
    out: JsonLines,
    urls: BTreeMap<RelayId, String>,
    complete: Vec<bool>,
    peer_errors: RateLimit,
}

/// The URL `relay` was added with, as given on the command line.
fn url(urls: &BTreeMap<RelayId, String>, relay: RelayId) -> &str {
    urls.get(&relay).map_or("", String::as_str)
}

impl Run {
    fn relay_event(&mut self, relay: RelayId, event: &SessionEvent) -> Result<(), Failure> {
        let url = url(&self.urls, relay);
        let line = match event {
            SessionEvent::Connected => Line::Connected { relay: url },
            SessionEvent::Disconnected { reconnect_in, why } => {
                let (why, close_code) = disconnect_why(*why);
                Line::Disconnected {
                    relay: url,
                    reconnect_in_ms: reconnect_in.map(millis),
                    why,
                    close_code,
                }
            }
            SessionEvent::Notice { message } => Line::Notice {
                relay: url,
                message,
            },
            SessionEvent::AuthChallenge { challenge, .. } => Line::Auth {
                relay: url,
                challenge,
            },
            SessionEvent::Authenticated => Line::Authenticated { relay: url },
            SessionEvent::AuthFailed { reason } => Line::AuthFailed { relay: url, reason },
            SessionEvent::SignerFailed { error } => Line::SignerFailed {
                relay: url,
                error: error.to_string(),
            },
            SessionEvent::RateLimited { window } => Line::RateLimited {
                relay: url,
                window_ms: millis(*window),
            },
            SessionEvent::SubscriptionLimit { max } => Line::SubscriptionLimit {
                relay: url,
                max: *max,
            },
            SessionEvent::PeerError { error } => {
                let Some(suppressed) = self.peer_errors.admit(std::time::Instant::now()) else {
                    return Ok(());
                };
                Line::PeerError {
                    relay: url,
                    kind: error.kind(),
                    excerpt: rate_limit::excerpt(&error.to_string()),
                    suppressed,
                }
            }
            other => {
                tracing::debug!(?other, url, "relay event");
                return Ok(());
            }
        };
        Ok(self.out.write(&line)?)
    }

    fn item(&mut self, index: usize, item: &PoolItem) -> Result<(), Failure> {
        let sub = index.to_string();
        let sub = sub.as_str();
        match item {
            PoolItem::Event { relay, raw, .. } => {
                let raw = raw_json(raw);
                let relay = url(&self.urls, *relay);
                self.out.write(&Line::Event {
                    sub,
                    relay,
                    event: &raw,
                })?;
            }
            PoolItem::Eose { relay } => self.out.write(&Line::Eose {
                sub,
                relay: url(&self.urls, *relay),
            })?,
            PoolItem::CaughtUp { relay, caught_up } => self.out.write(&Line::CaughtUp {
                sub,
                relay: url(&self.urls, *relay),
                method: caught_up.method.as_str(),
                exact_since: caught_up.exact_since,
                recovered: caught_up.recovered,
            })?,
            PoolItem::RelayClosed {
                relay,
                reason,
                attempts,
            } => self.out.write(&Line::Closed {
                sub,
                relay: url(&self.urls, *relay),
                reason,
                attempts: *attempts,
            })?,
            PoolItem::Complete(outcome) => {
                self.complete[index] = true;
                let (outcome, missing) = match outcome {
                    Outcome::Complete => ("complete", Vec::new()),
                    Outcome::Partial { missing } => (
                        "partial",
                        missing.iter().map(|(r, _)| url(&self.urls, *r)).collect(),
                    ),
                    _ => ("partial", Vec::new()),
                };
                self.out.write(&Line::Complete {
                    sub,
                    outcome,
                    missing,
                })?;
            }
            PoolItem::Ended { .. } => self.out.write(&Line::Ended { sub })?,
            PoolItem::Invalid { relay, id, reason } => self.out.write(&Line::Invalid {
                sub,
                relay: url(&self.urls, *relay),
                id: id.to_string(),
                reason,
            })?,
            PoolItem::Relay { relay, event } => {
                let relay = url(&self.urls, *relay);
                match event {
                    SubscriptionEvent::Retrying { after, attempt } => {
                        self.out.write(&Line::Retrying {
                            sub,
                            relay,
                            in_ms: millis(*after),
                            attempt: *attempt,
                        })?
                    }
                    SubscriptionEvent::Queued => self.out.write(&Line::Queued { sub, relay })?,
                    SubscriptionEvent::EoseTimeout => {
                        self.out.write(&Line::EoseTimeout { sub, relay })?;
                    }
                    other => tracing::debug!(sub, relay, ?other, "subscription event"),
                }
            }
            other => tracing::debug!(sub, ?other, "pool item"),
        }
        Ok(())
    }
}
