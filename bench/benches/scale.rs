//! `cargo bench -p tether-bench --bench scale`: 1 000 relay connections from one client, 10
//! subscriptions on each, idle after EOSE, then one event per subscription; tether's pool
//! (verifying) against nostr-sdk's `Client`. Each client runs in a child process (this binary,
//! re-executed) so its resident set and CPU are its own; the relays are one
//! tether-testserver relay in this process, serving every URL.
//!
//! `TETHER_SCALE_RELAYS` (1 000), `TETHER_SCALE_SUBS` (10) and `TETHER_SCALE_IDLE_SECS` (20)
//! change the shape; `TETHER_SCALE_MAX_CONNECTING` sets tether's handshake limit (the pool's
//! default otherwise). The relay counts the peak of handshakes in flight for each client.
//! `TETHER_SCALE_TLS=1` serves wss:// with a certificate from a CA made with openssl, which
//! tether trusts through `Config::roots`; nostr-sdk takes no private root, so it sits that
//! run out.

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::Duration;

use tether_bench::e2e::Contender;
use tether_bench::scale::{self, Phases, ScaleMeasurement};
use tether_testserver::server::TestRelay;
use tether_testserver::{RelayModel, StoredEvent};

fn main() {
    scale::raise_open_files_limit();
    let relays = env_usize("TETHER_SCALE_RELAYS", 1_000);
    let subs = env_usize("TETHER_SCALE_SUBS", 10);
    let idle = Duration::from_secs(env_usize("TETHER_SCALE_IDLE_SECS", 20) as u64);
    if let Ok(who) = std::env::var("TETHER_SCALE_CHILD") {
        return child(&who, relays, subs, idle);
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("relay runtime");
    let tls = std::env::var("TETHER_SCALE_TLS").is_ok_and(|v| v == "1");
    let ca = tls.then(|| {
        tether_testserver::files::TestCa::new(std::path::Path::new("openssl")).expect("test CA")
    });
    let relay = runtime
        .block_on(async {
            match &ca {
                Some(ca) => {
                    let cert = std::fs::read(ca.leaf_cert())?;
                    let key = std::fs::read(ca.leaf_key())?;
                    TestRelay::start_tls(RelayModel::default(), &cert, &key).await
                }
                None => TestRelay::start(RelayModel::default()).await,
            }
        })
        .expect("relay starts");
    let root = ca.as_ref().map(tether_testserver::files::TestCa::root_cert);
    let contenders: &[Contender] = if tls {
        &[Contender::TetherPoolVerifying]
    } else {
        &[Contender::TetherPoolVerifying, Contender::NostrSdk]
    };
    let mut rows = Vec::new();
    for &contender in contenders {
        let events = scale::trickle(subs);
        relay.take_peak_handshakes();
        let mut m = parent(contender, &relay, &runtime, root.as_deref(), &events);
        m.peak_handshakes = relay.take_peak_handshakes();
        assert_eq!(
            m.trickle_received,
            subs,
            "{} missed trickle events",
            contender.name()
        );
        eprintln!("{}: {m:?}", contender.name());
        rows.push((contender, m));
    }
    println!(
        "{relays} relays x {subs} subscriptions ({}), idle {} s\n\n\
         | client | connect + EOSE all | RSS per connection | idle CPU per minute | peak handshakes in flight |\n\
         | --- | ---: | ---: | ---: | ---: |",
        if tls { "wss://" } else { "ws://" },
        idle.as_secs()
    );
    for (contender, m) in &rows {
        println!(
            "| {} | {:.2} s | {:.1} KiB | {:.0} ms | {} |",
            contender.name(),
            m.connect_and_eose.as_secs_f64(),
            m.rss_per_connection_bytes / 1024.0,
            m.idle_cpu_per_minute.as_secs_f64() * 1e3,
            m.peak_handshakes
        );
    }
    if let [(_, t), (_, n)] = rows.as_slice() {
        println!(
            "\ntether / nostr-sdk: connect + EOSE {:.2}x, RSS per connection {:.2}x, idle CPU {:.2}x",
            t.connect_and_eose.as_secs_f64() / n.connect_and_eose.as_secs_f64(),
            t.rss_per_connection_bytes / n.rss_per_connection_bytes,
            t.idle_cpu_per_minute.as_secs_f64() / n.idle_cpu_per_minute.as_secs_f64().max(1e-9)
        );
    }
}

/// Run one contender in a child process; send the trickle when it says its idle span is over.
fn parent(
    contender: Contender,
    relay: &TestRelay,
    runtime: &tokio::runtime::Runtime,
    root: Option<&std::path::Path>,
    events: &[nostr::Event],
) -> ScaleMeasurement {
    let who = match contender {
        Contender::NostrSdk => "nostr-sdk",
        _ => "tether",
    };
    let mut command = Command::new(std::env::current_exe().expect("this binary"));
    command
        .env("TETHER_SCALE_CHILD", who)
        .env("TETHER_SCALE_URL", relay.url());
    if let Some(root) = root {
        command.env("TETHER_SCALE_ROOT", root);
    }
    let mut child = command
        .stdout(Stdio::piped())
        .spawn()
        .expect("child starts");
    let stdout = BufReader::new(child.stdout.take().expect("piped"));
    let mut result = None;
    for line in stdout.lines() {
        let line = line.expect("child output");
        match line.as_str() {
            "ready" => eprintln!("{who}: {} connections open", relay.open_connections()),
            "idle-done" => {
                let _guard = runtime.enter();
                for (n, event) in events.iter().enumerate() {
                    relay.store(StoredEvent {
                        n: n as u64,
                        created_at: event.created_at.as_secs(),
                        kind: u64::from(event.kind.as_u16()),
                        json: nostr::JsonUtil::as_json(event),
                    });
                }
            }
            other => result = parse(other),
        }
    }
    assert!(child.wait().expect("child exits").success(), "{who} failed");
    result.expect("the child reports")
}

fn child(who: &str, relays: usize, subs: usize, idle: Duration) {
    let base = std::env::var("TETHER_SCALE_URL").expect("TETHER_SCALE_URL");
    let contender = if who == "nostr-sdk" {
        Contender::NostrSdk
    } else {
        Contender::TetherPoolVerifying
    };
    let root = std::env::var_os("TETHER_SCALE_ROOT")
        .map(|path| std::fs::read(path).expect("the CA's certificate"));
    let m = scale::run_client(contender, &base, relays, subs, idle, root, &mut Stdout);
    println!(
        "result {} {} {} {}",
        m.connect_and_eose.as_nanos(),
        m.rss_per_connection_bytes,
        m.idle_cpu_per_minute.as_nanos(),
        m.trickle_received
    );
}

struct Stdout;

impl Phases for Stdout {
    fn ready(&mut self) {
        say("ready");
    }

    fn idle_done(&mut self) {
        say("idle-done");
    }
}

fn say(line: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

fn parse(line: &str) -> Option<ScaleMeasurement> {
    let mut fields = line.strip_prefix("result ")?.split(' ');
    let mut next = || fields.next()?.parse::<f64>().ok();
    Some(ScaleMeasurement {
        connect_and_eose: Duration::from_nanos(next()? as u64),
        rss_per_connection_bytes: next()?,
        idle_cpu_per_minute: Duration::from_nanos(next()? as u64),
        trickle_received: next()? as usize,
        peak_handshakes: 0,
    })
}

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}
