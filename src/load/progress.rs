//! Progress of a load run on stderr: requests done (of `-n`) or time gone (of `-d`),
//! with the running rate. Drawn only for a run that lasts over a second, on a terminal
//! that can redraw a line (not `TERM=dumb`), and never with `-q`.

use std::io::IsTerminal;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// Shown after this long.
const DELAY: Duration = Duration::from_secs(1);

/// The display.
pub struct Progress {
    bar: Option<ProgressBar>,
    started: Instant,
    requests: Option<u64>,
    duration: Option<Duration>,
}

impl Progress {
    /// For a run of `requests` or `duration`; `show` false draws nothing.
    pub fn new(show: bool, requests: Option<u64>, duration: Option<Duration>) -> Progress {
        let dumb = std::env::var_os("TERM").is_some_and(|t| t == "dumb");
        let show = show && !dumb && std::io::stderr().is_terminal();
        Progress {
            bar: show.then(|| ProgressBar::with_draw_target(None, ProgressDrawTarget::hidden())),
            started: Instant::now(),
            requests,
            duration,
        }
    }

    /// `done` requests so far.
    pub fn update(&self, done: u64) {
        let Some(bar) = &self.bar else { return };
        let gone = self.started.elapsed();
        if gone < DELAY {
            return;
        }
        if bar.is_hidden() {
            let (len, unit) = match (self.requests, self.duration) {
                (Some(n), _) => (n, "requests"),
                (None, Some(d)) => (d.as_millis() as u64, "ms"),
                (None, None) => (0, ""),
            };
            bar.set_length(len);
            bar.set_style(
                ProgressStyle::with_template(&format!(
                    "{{spinner}} [{{elapsed_precise}}] {{bar:30}} {{pos}}/{{len}} {unit} {{msg}}"
                ))
                .unwrap_or_else(|_| ProgressStyle::default_bar()),
            );
            bar.set_draw_target(ProgressDrawTarget::stderr());
        }
        let pos = match self.requests {
            Some(_) => done,
            None => gone.as_millis() as u64,
        };
        bar.set_position(pos);
        let rate = done as f64 / gone.as_secs_f64();
        bar.set_message(match self.requests {
            Some(_) => format!("{rate:.0} requests/s"),
            None => format!("{done} requests, {rate:.0}/s"),
        });
    }

    /// Remove the bar.
    pub fn finish(&self) {
        if let Some(b) = &self.bar {
            b.finish_and_clear();
        }
    }
}
