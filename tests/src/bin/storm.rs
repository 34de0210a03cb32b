//! `cargo run --release -p tether-testkit --bin storm [-- --clients N --capacity K --down SECS --seed S --sweep]`
//!
//! Runs the fleet reconnect storm for every policy, prints a table, and writes
//! `target/storm/storm.csv` (attempts per second per policy) and `target/storm/storm.svg`.
//! `--sweep` adds the other jitter widths weighed for the default.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::Duration;

use plotters::prelude::*;
use tether_testkit::storm::{contenders, jitter_sweep, Outcome, Storm};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let (storm, sweep) = parse_args()?;
    let mut policies = contenders();
    if sweep {
        policies.extend(jitter_sweep());
    }
    let outcomes: Vec<Outcome> = policies.iter().map(|c| storm.run(c)).collect();
    print!("{}", table(&storm, &outcomes));
    let dir = out_dir();
    std::fs::create_dir_all(&dir)?;
    std::fs::write(dir.join("storm.csv"), csv(&outcomes))?;
    plot(&storm, &outcomes, &dir.join("storm.svg"))?;
    println!(
        "\nwrote {} and {}",
        dir.join("storm.csv").display(),
        dir.join("storm.svg").display()
    );
    Ok(())
}

fn parse_args() -> Result<(Storm, bool), String> {
    let mut storm = Storm::default();
    let mut sweep = false;
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        if flag == "--sweep" {
            sweep = true;
            continue;
        }
        let value = args.next().ok_or_else(|| format!("{flag} needs a value"))?;
        let n: u64 = value
            .parse()
            .map_err(|_| format!("{flag}: not a number: {value}"))?;
        match flag.as_str() {
            "--clients" => storm.clients = n as usize,
            "--capacity" => storm.capacity = n as usize,
            "--down" => storm.down = Duration::from_secs(n),
            "--horizon" => storm.horizon = Duration::from_secs(n),
            "--seed" => storm.seed = n,
            other => return Err(format!("unknown flag {other}")),
        }
    }
    Ok((storm, sweep))
}

fn out_dir() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR"))
                .join("..")
                .join("target")
        });
    target.join("storm")
}

/// The table of `docs/storm.md`: peak, peak over the uniform ideal, total attempts, time to 99%.
pub fn table(storm: &Storm, outcomes: &[Outcome]) -> String {
    let ideal = storm.uniform_ideal();
    let mut out = format!(
        "{} clients, server down {} s, then accepting {}/s; uniform-spread ideal {:.0} attempts/s\n\n",
        storm.clients,
        storm.down.as_secs(),
        storm.capacity,
        ideal
    );
    out.push_str("| policy | peak attempts/s after return | / ideal | peak during outage | total attempts | 99% reconnected after return |\n");
    out.push_str("| --- | ---: | ---: | ---: | ---: | ---: |\n");
    for o in outcomes {
        let to_99 = o.to_99.map_or("not within the run".to_owned(), |d| {
            format!("{:.1} s", d.as_secs_f64())
        });
        let _ = writeln!(
            out,
            "| {} | {} | {:.2}x | {} | {} | {} |",
            o.name,
            o.peak_after_return,
            o.peak_after_return as f64 / ideal,
            o.peak,
            o.total,
            to_99
        );
    }
    out
}

fn csv(outcomes: &[Outcome]) -> String {
    let mut out = String::from("second");
    for o in outcomes {
        let _ = write!(out, ",\"{}\"", o.name);
    }
    out.push('\n');
    let len = outcomes
        .iter()
        .map(|o| o.attempts_per_sec.len())
        .max()
        .unwrap_or(0);
    for sec in 0..len {
        let _ = write!(out, "{sec}");
        for o in outcomes {
            let _ = write!(
                out,
                ",{}",
                o.attempts_per_sec.get(sec).copied().unwrap_or(0)
            );
        }
        out.push('\n');
    }
    out
}

fn plot(
    storm: &Storm,
    outcomes: &[Outcome],
    path: &std::path::Path,
) -> Result<(), Box<dyn std::error::Error>> {
    let root = SVGBackend::new(path, (1200, 700)).into_drawing_area();
    root.fill(&WHITE)?;
    let shown = 240usize;
    // A log scale keeps the fixed-delay spikes and the jittered plateaus readable together.
    let top = outcomes.iter().map(|o| o.peak).max().unwrap_or(1).max(1) as f64 * 2.0;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            format!(
                "{} clients, server down {} s, then {} accepts/s",
                storm.clients,
                storm.down.as_secs(),
                storm.capacity
            ),
            ("sans-serif", 22),
        )
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d(0usize..shown, (1.0f64..top).log_scale())?;
    chart
        .configure_mesh()
        .x_desc("seconds since the server went down")
        .y_desc("connection attempts per second")
        .draw()?;
    for (i, o) in outcomes.iter().enumerate() {
        let color = Palette99::pick(i).to_rgba();
        let points = o
            .attempts_per_sec
            .iter()
            .take(shown)
            .enumerate()
            .map(|(s, &n)| (s, (n as f64).max(1.0)));
        chart
            .draw_series(LineSeries::new(points, color.stroke_width(2)))?
            .label(o.name)
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(3))
            });
    }
    chart
        .configure_series_labels()
        .border_style(BLACK)
        .background_style(WHITE.mix(0.85))
        .draw()?;
    root.present()?;
    Ok(())
}
