//! Progress on stderr: a bar over the planned scenarios, ticking while one runs. Drawn
//! only when stderr is a terminal that can redraw a line (not `TERM=dumb`, as in Emacs
//! shells and some CI logs) and `--quiet` is off.

use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// The progress display.
pub struct Progress(ProgressBar);

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
        bar.set_style(
            ProgressStyle::with_template(
                "{spinner} [{elapsed_precise}] {bar:30} {pos}/{len} {msg}",
            )
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
        );
        if !bar.is_hidden() {
            bar.enable_steady_tick(Duration::from_millis(120));
        }
        Progress(bar)
    }

    /// Say what runs now.
    pub fn set_message(&self, msg: String) {
        self.0.set_message(msg);
    }

    /// One scenario done.
    pub fn inc(&self) {
        self.0.inc(1);
    }

    /// Remove the bar.
    pub fn finish(&self) {
        self.0.finish_and_clear();
    }
}
