//! The demo's live view: a progress display on a terminal, plain log lines otherwise.

use std::io::Write;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// How often the plain view prints a status line.
const PLAIN_STATUS_EVERY: Duration = Duration::from_secs(1);

/// Where the demo's running commentary goes.
pub(crate) enum Display {
    /// A terminal: a bar over the hostile phase with the status under it; log lines scroll
    /// above it.
    Bar(ProgressBar),
    /// A pipe or a file: log lines, and a status line every second.
    Plain { next_status: Duration },
}

impl Display {
    /// A bar when stdout is a terminal, plain lines otherwise.
    pub(crate) fn new(terminal: bool, duration: Duration) -> Self {
        if !terminal {
            return Display::Plain {
                next_status: Duration::ZERO,
            };
        }
        let bar = ProgressBar::with_draw_target(
            Some(duration.as_millis().try_into().unwrap_or(u64::MAX)),
            ProgressDrawTarget::stdout(),
        );
        let style =
            ProgressStyle::with_template("{spinner} [{elapsed:>3}] {bar:30} {prefix}\n  {msg}")
                .unwrap_or_else(|_| ProgressStyle::default_bar());
        bar.set_style(style);
        bar.enable_steady_tick(Duration::from_millis(120));
        Display::Bar(bar)
    }

    /// A line (a plain line, or one printed above the bar).
    pub(crate) fn say(&self, line: &str) {
        match self {
            Display::Bar(bar) => bar.println(line),
            Display::Plain { .. } => print_line(line),
        }
    }

    /// Something that happened at `at` (demo time).
    pub(crate) fn log(&self, at: Duration, line: &str) {
        self.say(&format!("[{:>6.2}s] {line}", at.as_secs_f64()));
    }

    /// The current status at `at`: what the relay is doing, where the subscriptions
    /// stand, and what flows.
    pub(crate) fn status(&mut self, at: Duration, phase: &str, subs: &str, flow: &str) {
        match self {
            Display::Bar(bar) => {
                bar.set_position(at.as_millis().try_into().unwrap_or(u64::MAX));
                bar.set_prefix(phase.to_owned());
                bar.set_message(format!("{subs}\n  {flow}"));
            }
            Display::Plain { next_status } => {
                if at < *next_status {
                    return;
                }
                *next_status = at + PLAIN_STATUS_EVERY;
                print_line(&format!("[{:>6.2}s] {subs} || {flow}", at.as_secs_f64()));
            }
        }
    }

    /// Take the bar away before the summary.
    pub(crate) fn finish(&self) {
        if let Display::Bar(bar) = self {
            bar.finish_and_clear();
        }
    }
}

/// Write a line to stdout; a closed stdout is not worth stopping the demo for (its exit
/// code still tells whether the claim held).
fn print_line(line: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
}
