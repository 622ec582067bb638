//! What `compare` matches across two documents of one kind that are not the measuring
//! commands' (those are matched scenario by scenario, with their options): each body's
//! rows, each with what it is, how it reads and its headline figure in every run. Each
//! body says what its rows are in its own module; `Body::rows` in the document room only
//! asks it.

use crate::measure::headline::Headline;

/// One row of a document, as `compare` sees it.
#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    /// What matches it with a row of the other document: the same thing measured (a
    /// relay's transport, method and size; a load's method, path and concurrency;
    /// a mesh's test and pair), never where or when.
    pub key: String,
    /// How a person names it (`relay tcp splice 64 KiB`).
    pub label: String,
    /// The figure it is judged by.
    pub headline: Headline,
    /// That figure in each run, in run order.
    pub values: Vec<f64>,
    /// Why it has no figure (it failed, or was skipped), if it has none.
    pub error: Option<String>,
}

impl Row {
    /// A row whose only figure is `value` (a command that measures once), or that has
    /// none.
    pub fn once(key: String, label: String, headline: Headline, value: Option<f64>) -> Row {
        Row {
            key,
            label,
            headline,
            values: value.into_iter().filter(|v| v.is_finite()).collect(),
            error: None,
        }
    }
}

impl Row {
    /// The same row with its figure in each of `runs` (none: as it was).
    pub fn with_runs(mut self, runs: &[f64]) -> Row {
        if !runs.is_empty() {
            self.values = runs.iter().copied().filter(|v| v.is_finite()).collect();
        }
        self
    }
}
