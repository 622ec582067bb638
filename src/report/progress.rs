//! Progress on stderr: a bar over the planned scenarios, ticking while one runs, with an
//! estimate of the time left when the runner gives one. Drawn only when stderr is a
//! terminal that can redraw a line (not `TERM=dumb`, as in Emacs shells and some CI logs)
//! and `--quiet` is off. Lines printed through it (`--interval`) appear above the bar.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressState, ProgressStyle};

/// The progress display.
#[derive(Clone)]
pub struct Progress {
    bar: ProgressBar,
    /// The estimate of the time left and when it was made (it counts down from then).
    eta: Arc<Mutex<Option<(Instant, Duration)>>>,
}

/// `1m05s`, `42s`.
fn short(d: Duration) -> String {
    let s = d.as_secs();
    match s {
        0..=59 => format!("{s}s"),
        _ => format!("{}m{:02}s", s / 60, s % 60),
    }
}

impl Progress {
    /// A bar for `total` scenarios.
    pub fn new(total: u64, quiet: bool) -> Progress {
        let dumb = std::env::var_os("TERM").is_some_and(|t| t == "dumb");
        let target = if quiet || dumb {
            ProgressDrawTarget::hidden()
        } else {
            ProgressDrawTarget::stderr()
        };
        let bar = ProgressBar::with_draw_target(Some(total), target);
        let eta: Arc<Mutex<Option<(Instant, Duration)>>> = Arc::default();
        let shown = Arc::clone(&eta);
        bar.set_style(
            ProgressStyle::with_template(
                "{spinner} [{elapsed_precise}] {bar:30} {pos}/{len}{left} {msg}",
            )
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .with_key(
                "left",
                move |_: &ProgressState, w: &mut dyn std::fmt::Write| {
                    let at = *shown.lock().unwrap_or_else(|e| e.into_inner());
                    if let Some((made, left)) = at {
                        let _ = write!(w, " ETA {}", short(left.saturating_sub(made.elapsed())));
                    }
                },
            ),
        );
        if !bar.is_hidden() {
            bar.enable_steady_tick(Duration::from_millis(120));
        }
        Progress { bar, eta }
    }

    /// Say what runs now.
    pub fn set_message(&self, msg: String) {
        self.bar.set_message(msg);
    }

    /// The time the rest of the plan should take, from now.
    pub fn set_eta(&self, left: Duration) {
        *self.eta.lock().unwrap_or_else(|e| e.into_inner()) = Some((Instant::now(), left));
    }

    /// One scenario done.
    pub fn inc(&self) {
        self.bar.inc(1);
    }

    /// Print a line on stderr above the bar (or plainly when there is no bar).
    pub fn println(&self, line: &str) {
        if self.bar.is_hidden() {
            eprintln!("{line}");
        } else {
            self.bar.println(line);
        }
    }

    /// Remove the bar.
    pub fn finish(&self) {
        self.bar.finish_and_clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_time_left_reads_in_minutes_and_seconds() {
        assert_eq!(short(Duration::from_millis(42_900)), "42s");
        assert_eq!(short(Duration::from_secs(65)), "1m05s");
        assert_eq!(short(Duration::from_secs(600)), "10m00s");
    }
}
