//! A tether-testserver relay on 127.0.0.1 for tests outside Rust (the Python package's).
//!
//! `cargo run -p tether-ffi --example testpeer -- [--events N] [--auth] [--refuse MSG]
//! [--scripted-closed MSG]...`
//!
//! Prints the relay's `ws://` URL as the first stdout line and serves until stdin closes;
//! then prints one JSON line counting the frames it received by verb, and exits.

use std::collections::BTreeMap;
use std::error::Error;

use tether_testserver::server::TestRelay;
use tether_testserver::RelayModel;
use tokio::io::AsyncReadExt;

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn Error>> {
    let mut args = std::env::args().skip(1);
    let mut model = RelayModel::with_events(0);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--events" => {
                let n: u64 = args.next().ok_or("--events N")?.parse()?;
                model.events = RelayModel::with_events(n).events;
            }
            "--auth" => model.auth_required = true,
            "--refuse" => model.refuse_all = Some(args.next().ok_or("--refuse MSG")?),
            "--scripted-closed" => model
                .scripted_closed
                .push_back(args.next().ok_or("--scripted-closed MSG")?),
            other => return Err(format!("unknown argument {other}").into()),
        }
    }
    let relay = TestRelay::start(model).await?;
    println!("{}", relay.url());
    let mut sink = Vec::new();
    tokio::io::stdin().read_to_end(&mut sink).await?;
    let mut frames: BTreeMap<String, usize> = BTreeMap::new();
    for (_, _, text) in relay.log().received {
        let verb = tether_testserver::server::frame_kind(&text).unwrap_or("?");
        *frames.entry(verb.to_owned()).or_default() += 1;
    }
    println!("{}", serde_json::json!({ "frames": frames }));
    Ok(())
}
