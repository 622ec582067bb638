//! The one document every command writes: an envelope that is the same for every kind
//! (the tool, the schema version, the command line, the machine, when it ran, whether it
//! was interrupted or failed, its warnings) and a body tagged by `kind`.
//!
//! ```json
//! { "tool": {"name": "sockbench", "version": "0.1.0"}, "schema_version": 11,
//!   "command": ["sockbench", "stream"], "environment": {...},
//!   "started_at": "2026-11-27T10:00:00.000000Z", "ended_at": "...",
//!   "interrupted": false, "error": null, "warnings": [],
//!   "kind": "stream", "body": { "placement": {...}, "results": [...], ... } }
//! ```
//!
//! [`Document`] reads any kind (`report`, `compare`); each command keeps its own type in
//! memory and writes it in this shape. `schema/document.schema.json` is generated from
//! [`Document`]. Documents of older versions are read by [`super::legacy`].

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

/// Any document: the envelope and its body.
#[derive(Clone, Debug, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Document {
    /// What every document says of itself.
    #[serde(flatten)]
    pub envelope: Envelope,
    /// What the command measured, by `kind`.
    #[serde(flatten)]
    pub body: Body,
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

/// A document's body, tagged by the command that wrote it (the larger bodies boxed).
#[derive(Clone, Debug, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "kind", content = "body", rename_all = "kebab-case")]
pub enum Body {
    /// `sockbench stream`.
    Stream(BenchBody),
    /// `sockbench pingpong`.
    Pingpong(BenchBody),
    /// `sockbench rate`.
    Rate(BenchBody),
    /// `sockbench connect`.
    Connect(BenchBody),
    /// `sockbench` and `sockbench suite`.
    Suite(BenchBody),
    /// `sockbench relay`.
    Relay(Box<crate::mode::relay::RelayBody>),
    /// `sockbench swarm`.
    Swarm(Box<crate::mode::swarm::SwarmBody>),
    /// `sockbench load`.
    Load(Box<crate::load::LoadBody>),
    /// `sockbench serve`.
    Serve(Box<crate::mode::serve::ServeBody>),
    /// `sockbench models`.
    Models(Box<crate::mode::models::ModelsBody>),
    /// `sockbench mesh`.
    Mesh(Box<crate::mesh::report::MeshBody>),
    /// `sockbench listen` (its end-of-run summary).
    Listen(Box<crate::mode::listen::ListenBody>),
    /// `sockbench compare`.
    Compare(Box<crate::mode::compare::CompareBody>),
}

impl Body {
    /// Which kind of body this is.
    pub fn kind(&self) -> Kind {
        match self {
            Body::Stream(_) => Kind::Stream,
            Body::Pingpong(_) => Kind::Pingpong,
            Body::Rate(_) => Kind::Rate,
            Body::Connect(_) => Kind::Connect,
            Body::Suite(_) => Kind::Suite,
            Body::Relay(_) => Kind::Relay,
            Body::Swarm(_) => Kind::Swarm,
            Body::Load(_) => Kind::Load,
            Body::Serve(_) => Kind::Serve,
            Body::Models(_) => Kind::Models,
            Body::Mesh(_) => Kind::Mesh,
            Body::Listen(_) => Kind::Listen,
            Body::Compare(_) => Kind::Compare,
        }
    }

    /// An empty body of `kind` (a document that says why the command failed before it
    /// measured anything).
    pub fn empty(kind: Kind) -> Body {
        match kind {
            Kind::Relay => Body::Relay(Default::default()),
            Kind::Swarm => Body::Swarm(Default::default()),
            Kind::Load => Body::Load(Default::default()),
            Kind::Serve => Body::Serve(Default::default()),
            Kind::Models => Body::Models(Default::default()),
            Kind::Mesh => Body::Mesh(Default::default()),
            Kind::Listen => Body::Listen(Default::default()),
            Kind::Compare => Body::Compare(Default::default()),
            bench => Body::bench(bench, BenchBody::default()),
        }
    }

    /// The body of a bench kind (another kind's: the suite's).
    pub fn bench(kind: Kind, body: BenchBody) -> Body {
        match kind {
            Kind::Stream => Body::Stream(body),
            Kind::Pingpong => Body::Pingpong(body),
            Kind::Rate => Body::Rate(body),
            Kind::Connect => Body::Connect(body),
            _ => Body::Suite(body),
        }
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

impl Document {
    /// The document as every output reads it: its kind's own report, whatever the kind
    /// (`sockbench report FILE` prints any document in any format this way).
    pub fn rendered(self) -> Box<dyn crate::report::output::Rendered> {
        let envelope = self.envelope;
        match self.body {
            Body::Stream(_)
            | Body::Pingpong(_)
            | Body::Rate(_)
            | Body::Connect(_)
            | Body::Suite(_) => {
                let doc = Document {
                    envelope,
                    body: self.body,
                };
                match crate::report::Report::try_from(doc) {
                    Ok(r) => Box::new(r),
                    Err(e) => unreachable!("a measuring command's body is a report: {e}"),
                }
            }
            Body::Relay(body) => Box::new(crate::mode::relay::RelayReport {
                envelope,
                body: *body,
            }),
            Body::Swarm(body) => Box::new(crate::mode::swarm::SwarmReport {
                envelope,
                body: *body,
            }),
            Body::Load(body) => Box::new(crate::load::LoadReport {
                envelope,
                body: *body,
            }),
            Body::Serve(body) => Box::new(crate::mode::serve::ServeReport {
                envelope,
                body: *body,
            }),
            Body::Models(body) => Box::new(crate::mode::models::ModelsReport {
                envelope,
                body: *body,
            }),
            Body::Mesh(body) => Box::new(crate::mesh::report::MeshReport {
                envelope,
                body: *body,
            }),
            Body::Listen(body) => Box::new(crate::mode::listen::ListenReport {
                envelope,
                body: *body,
            }),
            Body::Compare(body) => Box::new(crate::mode::compare::CompareReport {
                envelope,
                body: *body,
            }),
        }
    }

    /// The envelope and the body of a document of kind `want`, which `take` gets out of
    /// its [`Body`]; a document of another kind is refused, named.
    ///
    /// # Errors
    /// The document is not one, or of another kind.
    pub fn read_as<'de, D, B>(
        d: D,
        want: Kind,
        take: impl FnOnce(Body) -> Option<B>,
    ) -> Result<(Envelope, B), D::Error>
    where
        D: serde::Deserializer<'de>,
    {
        let doc = Document::deserialize(d)?;
        let kind = doc.body.kind();
        match take(doc.body) {
            Some(body) => Ok((doc.envelope, body)),
            None => Err(serde::de::Error::custom(format!(
                "a {kind} document, not a {want} document"
            ))),
        }
    }
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
