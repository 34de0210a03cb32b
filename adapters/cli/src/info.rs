//! `tether info`: a relay's NIP-11 document, and what tether applies from it.

use std::time::Duration;

use serde::Serialize;
use serde_json::value::RawValue;
use tether_tokio::tether_core::nostr::{RelayConfig, RelayInfo, RelaySession};
use tether_tokio::tether_driver::{check_ws_url, info_url, InfoPolicy};

use tether_tokio::tether_core::line::embed as raw_json;

use crate::output::JsonLines;
use crate::{parse_secs, Failure};

/// `tether info <RELAY>`
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Output, one JSON object per line on stdout: info (relay, url: where the \
    document was fetched, document: as the relay sent it), then applied (relay, \
    max_subscriptions: the starting subscription cap, corrected by what the relay does; \
    max_message_length: no larger frame is sent, a larger publish is refused locally; \
    max_subid_length: wire subscription ids are kept this short; auth_first: with a signer \
    (--secret-key in tether req), REQs wait for NIP-42 on each connection; max_limit: the relay's \
    clamp on filter limits, reported and not rewritten). A null is a value the document \
    does not declare (or declares unusably). When no usable document comes back: \
    unavailable (relay, reason), then applied with every value null, exit 1.\n\
    Exit codes: 0 a document was read, 1 none was, 2 bad arguments."
)]
pub(crate) struct Args {
    /// The relay, ws:// or wss:// (fetched as http:// or https://).
    relay: String,
    /// Give up on the document after this many seconds.
    #[arg(long, default_value = "5", value_parser = parse_secs)]
    timeout: Duration,
}

#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Line<'a> {
    Info {
        relay: &'a str,
        url: &'a str,
        document: &'a RawValue,
    },
    Unavailable {
        relay: &'a str,
        reason: String,
    },
    Applied {
        relay: &'a str,
        max_subscriptions: Option<usize>,
        max_message_length: Option<usize>,
        max_subid_length: Option<usize>,
        auth_first: bool,
        max_limit: Option<usize>,
    },
}

pub(crate) async fn run(args: Args) -> Result<(), Failure> {
    let relay = args.relay.as_str();
    // The relay clients' rule, and its message, before the URL is mapped to http(s)://.
    check_ws_url(relay).map_err(|e| Failure::Usage(e.to_string()))?;
    let url = info_url(relay).map_err(|e| Failure::Usage(e.to_string()))?;
    let mut policy = InfoPolicy::default();
    policy.timeout = args.timeout;
    let mut out = JsonLines::new();
    let fetched = tether_tokio::fetch_relay_info(relay, policy)
        .await
        .map_err(|e| e.to_string());
    let parsed = fetched.and_then(|bytes| {
        let info = RelayInfo::parse(&bytes).map_err(|e| e.to_string())?;
        // A document that parses is a JSON object, so UTF-8.
        Ok((info, String::from_utf8_lossy(&bytes).into_owned()))
    });
    let info = match &parsed {
        Ok((info, document)) => {
            out.write(&Line::Info {
                relay,
                url: &url,
                document: &raw_json(document),
            })?;
            *info
        }
        Err(reason) => {
            out.write(&Line::Unavailable {
                relay,
                reason: reason.clone(),
            })?;
            RelayInfo::default()
        }
    };
    // What a session makes of it: the core decides, as it will when connecting (with a
    // signer, so `auth_first` says what happens with --secret-key).
    let mut config = RelayConfig::default();
    config.authenticates = true;
    let applied = RelaySession::new(config, 0)
        .apply_relay_info(tether_tokio::tether_core::Instant::ZERO, &info);
    out.write(&Line::Applied {
        relay,
        max_subscriptions: applied.subscription_limit,
        max_message_length: applied.max_message_length,
        max_subid_length: applied.max_subid_length,
        auth_first: applied.auth_first,
        max_limit: applied.max_limit,
    })?;
    match parsed {
        Ok(_) => Ok(()),
        Err(reason) => Err(Failure::Failed(format!(
            "{relay}: no relay information document: {reason}"
        ))),
    }
}
