//! `sockbench serve`'s document: the model, where it listened, and what it served at
//! what cost.

use serde::{Deserialize, Serialize};

use crate::http::Counters;
use crate::model::ModelKind;
use crate::report::envelope::{Envelope, Kind, Written};
use crate::vocab::units::format_bytes;

/// What `serve` measured: the body of its document (kind `serve`).
#[derive(Clone, Debug, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ServeBody {
    /// The model (null in the document of a command refused before it chose one).
    pub model: Option<ModelKind>,
    /// Where it listened (`http://ADDR:PORT/` or the socket file).
    pub url: String,
    /// listen(2)'s backlog.
    pub backlog: u32,
    /// Bytes of each 200's body.
    pub body_bytes: u64,
    /// Threads of the pool, epoll-workers or async models (null for the others).
    pub threads: Option<u64>,
    /// From listening to stopping.
    pub duration_seconds: f64,
    /// Every request answered (any status).
    pub requests: u64,
    /// From the first answer to the last: the time the server was busy (null with fewer
    /// than two answers).
    pub busy_seconds: Option<f64>,
    /// Requests answered per second while busy (`requests` over `busy_seconds`), as a load
    /// generator sees it; not over the uptime, which counts the wait for the first
    /// client and the time after the last (null with fewer than two answers).
    pub requests_per_second: Option<f64>,
    /// What the server counted.
    #[serde(flatten)]
    pub counters: Counters,
    /// User CPU of the whole server process over the time.
    pub cpu_user_seconds: f64,
    /// System CPU of the whole server process over the time.
    pub cpu_system_seconds: f64,
    /// CPU seconds per answered request (null when none was).
    pub cpu_seconds_per_request: Option<f64>,
}

/// `serve`'s document as it is made: the envelope (`interrupted`: Ctrl-C or SIGTERM
/// stopped it rather than `--duration`; `error`: why it failed, and then the body has
/// only what was asked) and the body.
#[derive(Clone, Debug)]
pub struct ServeReport {
    /// What every document says of itself.
    pub envelope: Envelope,
    /// What the server measured.
    pub body: ServeBody,
}

impl<'de> Deserialize<'de> for ServeReport {
    /// A serve document read back (any other kind is refused, named).
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<ServeReport, D::Error> {
        let (envelope, _, body) =
            crate::report::envelope::read_body(d, |k| k == Kind::Serve, "a serve document")?;
        Ok(ServeReport { envelope, body })
    }
}

impl ServeReport {
    /// The document to write.
    pub fn document(&self) -> Written<'_, ServeBody> {
        Written {
            envelope: &self.envelope,
            kind: Kind::Serve,
            body: &self.body,
        }
    }
}

impl ServeBody {
    /// `compare`'s row: the server's model, judged by the requests it answered per second
    /// while busy.
    pub fn rows(&self) -> Vec<crate::report::rows::Row> {
        let model = self
            .model
            .map_or_else(|| "-".to_string(), |m| m.to_string());
        let label = format!("serve {model} body {}", format_bytes(self.body_bytes));
        vec![crate::report::rows::Row::once(
            label.clone(),
            label,
            crate::measure::headline::Headline::rate("requests_per_second"),
            self.requests_per_second,
        )]
    }
}
