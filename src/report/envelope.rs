//! What every document says of itself (the envelope) and which command wrote it (its
//! kind), a document as it is written, and one kind of document read back on its own.
//! The one type that reads any kind, [`crate::document::Document`], sits above every
//! command's body.

use serde::{Deserialize, Serialize};

use crate::environment::Environment;
use crate::measure::ranking::Ranking;
use crate::report::{PlacementInfo, Tool};
use crate::results::ScenarioResult;
use crate::scenario::{Layout, Skipped};

/// Which command wrote a document, and so what its body holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Kind {
    /// `sockbench stream`.
    Stream,
    /// `sockbench pingpong`.
    Pingpong,
    /// `sockbench rate`.
    Rate,
    /// `sockbench connect`.
    Connect,
    /// `sockbench` and `sockbench suite`.
    Suite,
    /// `sockbench relay`.
    Relay,
    /// `sockbench swarm`.
    Swarm,
    /// `sockbench load`.
    Load,
    /// `sockbench serve`.
    Serve,
    /// `sockbench models`.
    Models,
    /// `sockbench mesh`.
    Mesh,
    /// `sockbench listen` (its end-of-run summary).
    Listen,
    /// `sockbench compare`.
    Compare,
}

impl Kind {
    /// Every kind.
    pub const ALL: [Kind; 13] = [
        Kind::Stream,
        Kind::Pingpong,
        Kind::Rate,
        Kind::Connect,
        Kind::Suite,
        Kind::Relay,
        Kind::Swarm,
        Kind::Load,
        Kind::Serve,
        Kind::Models,
        Kind::Mesh,
        Kind::Listen,
        Kind::Compare,
    ];

    /// The command's name.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Stream => "stream",
            Kind::Pingpong => "pingpong",
            Kind::Rate => "rate",
            Kind::Connect => "connect",
            Kind::Suite => "suite",
            Kind::Relay => "relay",
            Kind::Swarm => "swarm",
            Kind::Load => "load",
            Kind::Serve => "serve",
            Kind::Models => "models",
            Kind::Mesh => "mesh",
            Kind::Listen => "listen",
            Kind::Compare => "compare",
        }
    }

    /// The measuring command of a workload.
    pub fn of_workload(w: crate::scenario::WorkloadKind) -> Kind {
        // A measuring command bears its workload's name.
        let name = w.to_string();
        (Kind::ALL.into_iter())
            .find(|k| k.name() == name)
            .unwrap_or(Kind::Suite)
    }

    /// Whether this is a measuring command's kind (or the suite's): its body is a
    /// [`BenchBody`].
    pub fn is_bench(self) -> bool {
        matches!(
            self,
            Kind::Stream | Kind::Pingpong | Kind::Rate | Kind::Connect | Kind::Suite
        )
    }

    /// How a bench document's tables are laid out: the suite as its matrix, every other
    /// command one row per scenario.
    pub fn layout(self) -> Layout {
        match self {
            Kind::Suite => Layout::Suite,
            _ => Layout::List,
        }
    }
}

impl std::fmt::Display for Kind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// What every document says of itself, whatever its kind.
#[derive(Clone, Debug, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Envelope {
    /// The tool that wrote it.
    pub tool: Tool,
    /// Version of this shape ([`super::SCHEMA_VERSION`]); bumped on any incompatible
    /// change, for every kind at once.
    pub schema_version: u32,
    /// The command line, argv as given.
    pub command: Vec<String>,
    /// The machine it ran on; null in a document converted from a version that did not
    /// record it.
    pub environment: Option<Environment>,
    /// When the command started (RFC 3339, UTC, microseconds); null if not recorded.
    pub started_at: Option<String>,
    /// When it ended; null if not recorded (or not yet: an export rewritten as the
    /// command runs).
    pub ended_at: Option<String>,
    /// True if Ctrl-C (SIGTERM, SIGHUP) cut it short: the body holds what finished.
    pub interrupted: bool,
    /// Why the command failed, if it did; null otherwise.
    pub error: Option<String>,
    /// What to be careful of in the figures, for the whole document.
    pub warnings: Vec<String>,
}

impl Envelope {
    /// The envelope of a command starting now with `command`: this build, this
    /// machine, nothing measured yet.
    pub fn starting(command: Vec<String>) -> Envelope {
        Envelope {
            tool: this_tool(),
            schema_version: crate::report::SCHEMA_VERSION,
            command,
            environment: Some(Environment::collect()),
            started_at: Some(now()),
            ended_at: None,
            interrupted: false,
            error: None,
            warnings: Vec::new(),
        }
    }

    /// The command is over: its end time, and whether Ctrl-C cut it short.
    pub fn end(&mut self) {
        self.ended_at = Some(now());
        self.interrupted |= crate::interrupt::requested();
    }
}

/// The body of the measuring commands (`stream`, `pingpong`, `rate`, `connect`) and of
/// the suite.
#[derive(Clone, Debug, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct BenchBody {
    /// Where the roles ran.
    pub placement: PlacementInfo,
    /// One object per finished scenario, in run order.
    pub results: Vec<ScenarioResult>,
    /// Combinations left out because they cannot work, with the reason.
    pub skipped: Vec<Skipped>,
    /// What the run ranked: the engines of each scenario run under several (`-e`), the
    /// suite's transports at each size; a winner only beyond the noise of the runs, none
    /// from single runs.
    pub rankings: Vec<Ranking>,
}

/// A document being written, borrowed from what its command keeps: the envelope, then
/// the kind and the body (the shape of [`Document`]).
#[derive(Serialize)]
pub struct Written<'a, B: Serialize> {
    /// What every document says of itself.
    #[serde(flatten)]
    pub envelope: &'a Envelope,
    /// Which command wrote it.
    pub kind: Kind,
    /// What it measured.
    pub body: &'a B,
}

/// The envelope of `tool`, as this build names itself.
pub fn this_tool() -> Tool {
    Tool {
        name: "sockbench".into(),
        version: env!("CARGO_PKG_VERSION").into(),
    }
}

/// Now, as a document's `started_at` and `ended_at` give it.
pub fn now() -> String {
    crate::vocab::units::utc_micros(std::time::SystemTime::now())
}

/// One kind of document read back on its own: its envelope, its kind and its body as
/// `B`, if `accept` takes the kind; a document of another kind is refused, named: "a
/// KIND document, not `want`".
///
/// # Errors
/// The document is not one, its kind is refused, or its body is not a `B`.
pub fn read_body<'de, D, B>(
    d: D,
    accept: impl FnOnce(Kind) -> bool,
    want: &str,
) -> Result<(Envelope, Kind, B), D::Error>
where
    D: serde::Deserializer<'de>,
    B: serde::de::DeserializeOwned,
{
    #[derive(Deserialize)]
    struct Tagged {
        #[serde(flatten)]
        envelope: Envelope,
        kind: Kind,
        body: serde_json::Value,
    }
    let t = Tagged::deserialize(d)?;
    if !accept(t.kind) {
        return Err(serde::de::Error::custom(format!(
            "a {} document, not {want}",
            t.kind
        )));
    }
    let body = B::deserialize(t.body).map_err(serde::de::Error::custom)?;
    Ok((t.envelope, t.kind, body))
}
