//! The one document every command writes, read back whatever its kind: the envelope
//! ([`Envelope`]) and a body tagged by `kind`, one type per command.
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
//! [`Document`]. Documents of older versions are read by [`legacy`]. This room sits
//! above every command's body: the measuring commands' ([`BenchBody`]), the load
//! generator's and the mesh's in their rooms, and the others' here, one file each.

pub mod compare;
pub mod legacy;
pub mod listen;
pub mod models;
pub mod relay;
pub mod serve;
pub mod swarm;

use serde::{Deserialize, Serialize};

use crate::report::envelope::{BenchBody, Envelope, Kind};
use crate::report::Report;

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
    Relay(Box<crate::document::relay::RelayBody>),
    /// `sockbench swarm`.
    Swarm(Box<crate::document::swarm::SwarmBody>),
    /// `sockbench load`.
    Load(Box<crate::load::LoadBody>),
    /// `sockbench serve`.
    Serve(Box<crate::document::serve::ServeBody>),
    /// `sockbench models`.
    Models(Box<crate::document::models::ModelsBody>),
    /// `sockbench mesh`.
    Mesh(Box<crate::mesh::report::MeshBody>),
    /// `sockbench listen` (its end-of-run summary).
    Listen(Box<crate::document::listen::ListenBody>),
    /// `sockbench compare`.
    Compare(Box<crate::document::compare::CompareBody>),
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

impl Body {
    /// The rows `compare` matches in a document of this kind; `None` for the measuring
    /// commands, whose scenarios compare matches with their options.
    pub fn rows(&self) -> Option<Vec<crate::report::rows::Row>> {
        match self {
            Body::Stream(_)
            | Body::Pingpong(_)
            | Body::Rate(_)
            | Body::Connect(_)
            | Body::Suite(_) => None,
            Body::Relay(b) => Some(b.rows()),
            Body::Swarm(b) => Some(b.rows()),
            Body::Load(b) => Some(b.rows()),
            Body::Serve(b) => Some(b.rows()),
            Body::Models(b) => Some(b.rows()),
            Body::Mesh(b) => Some(b.rows()),
            Body::Listen(_) | Body::Compare(_) => Some(Vec::new()),
        }
    }
}

impl From<Report> for Document {
    /// A report as the one document it is written as.
    fn from(r: Report) -> Document {
        Document {
            envelope: Envelope {
                tool: r.tool,
                schema_version: r.schema_version,
                command: r.command,
                environment: r.environment,
                started_at: r.started_at,
                ended_at: r.ended_at,
                interrupted: r.interrupted,
                error: r.error,
                warnings: r.warnings,
            },
            body: Body::bench(
                r.kind,
                BenchBody {
                    placement: r.placement,
                    results: r.results,
                    skipped: r.skipped,
                    rankings: r.rankings,
                },
            ),
        }
    }
}

impl TryFrom<Document> for Report {
    type Error = String;

    /// A bench kind's document as its report (another kind's is refused, named).
    fn try_from(doc: Document) -> Result<Report, String> {
        let kind = doc.body.kind();
        let body = match doc.body {
            Body::Stream(b)
            | Body::Pingpong(b)
            | Body::Rate(b)
            | Body::Connect(b)
            | Body::Suite(b) => b,
            other => {
                return Err(format!(
                "a {} document, not a report of the measuring commands (stream, pingpong, rate, \
                     connect, suite)",
                other.kind()
            ))
            }
        };
        Ok(Report::of(doc.envelope, kind, body))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::sample;

    fn envelope() -> Envelope {
        Envelope::starting(vec!["sockbench".into(), "load".into()])
    }

    #[test]
    fn a_report_read_as_any_document_is_the_same_document_and_back() {
        for (report, kind) in [
            (sample::pingpong(), Kind::Pingpong),
            (sample::suite(), Kind::Suite),
        ] {
            let v = serde_json::to_value(&report).unwrap();
            let doc: Document = serde_json::from_value(v.clone()).unwrap();
            assert_eq!(doc.body.kind(), kind);
            assert_eq!(
                doc.body.rows(),
                None,
                "scenarios are matched with their options"
            );
            assert_eq!(serde_json::to_value(&doc).unwrap(), v);
            let back = Report::try_from(doc).unwrap();
            assert_eq!(serde_json::to_value(&back).unwrap(), v);
        }
        let relay = Document {
            envelope: envelope(),
            body: Body::empty(Kind::Relay),
        };
        let why = Report::try_from(relay).unwrap_err();
        assert!(why.starts_with("a relay document, not a report"), "{why}");
    }

    #[test]
    fn a_document_of_one_kind_is_refused_as_another_by_name() {
        let load = Document {
            envelope: envelope(),
            body: Body::empty(Kind::Load),
        };
        let text = serde_json::to_string(&load).unwrap();
        let why = serde_json::from_str::<Report>(&text)
            .unwrap_err()
            .to_string();
        assert!(
            why.contains("a load document, not a report of the measuring commands"),
            "{why}"
        );
        let why = serde_json::from_str::<crate::load::LoadReport>(
            &serde_json::to_string(&Document {
                envelope: envelope(),
                body: Body::empty(Kind::Mesh),
            })
            .unwrap(),
        )
        .unwrap_err()
        .to_string();
        assert!(
            why.contains("a mesh document, not a load document"),
            "{why}"
        );
        let ok: crate::load::LoadReport = serde_json::from_str(&text).unwrap();
        assert_eq!(ok.envelope.command, load.envelope.command);
    }
}
