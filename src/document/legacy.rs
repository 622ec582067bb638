//! Documents of the shapes sockbench wrote before the one document (schema version 9):
//! read, so that a saved file still opens with `report` and `compare`, and converted.
//!
//! - the measuring commands' report, versions 4 to 8: the envelope and the body side by
//!   side at the top level, no `kind` (versions 5 to 8 only added keys, so an older one
//!   reads as a newer one without them; the frozen schema of version 8 is
//!   `schema/legacy/report-v8.schema.json`).
//! - each other command's document of its own (relay, swarm, load and models version 1,
//!   serve and compare version 2, marked `"document": "sockbench-<kind>"`; the mesh's
//!   version 1, marked by `tool` being a string): its envelope's fields taken out, the
//!   rest read as today's body (frozen schemas in `schema/legacy/`). What they ranked is
//!   ranked again by today's rule, which also says what each figure counts.

use serde::Deserialize;
use serde_json::Value;

use crate::document::{Body, Document};
use crate::environment::Environment;
use crate::report::envelope::Envelope;
use crate::report::{Kind, PlacementInfo, Report, Tool, SCHEMA_VERSION};
use crate::results::ScenarioResult;
use crate::scenario::Skipped;

/// The oldest version of the measuring commands' report that still reads.
pub const OLDEST_BENCH: u32 = 4;
/// The last version of it before the one document.
pub const LAST_BENCH: u32 = 8;

/// The measuring commands' report, versions 4 to 8.
#[derive(Debug, Deserialize)]
pub struct BenchV8 {
    /// Its version.
    pub schema_version: u32,
    /// The tool that wrote it.
    pub tool: Tool,
    /// The command line.
    pub command: Vec<String>,
    /// The machine.
    pub environment: Environment,
    /// Where the roles ran.
    pub placement: PlacementInfo,
    /// The scenarios.
    pub results: Vec<ScenarioResult>,
    /// What was left out.
    pub skipped: Vec<Skipped>,
    /// Warnings.
    pub warnings: Vec<String>,
    /// Ctrl-C cut it short.
    pub interrupted: bool,
    /// Why it failed.
    pub error: Option<String>,
    // Its `rankings` (version 8) are not read: they are ranked again from the results by
    // today's rule, which also says what each figure counts (version 8 did not).
}

impl BenchV8 {
    /// As today's report: the kind (and so the layout) from the command line it was run
    /// with, parsed as today's (plain `sockbench` is the suite); a line that no longer
    /// parses tells by its workloads (a mix is the suite).
    pub fn into_report(self) -> Report {
        use crate::cli::{Args, Command};
        use clap::Parser;
        let first = self.results.first().map(|r| r.workload);
        let mixed = self.results.iter().any(|r| Some(r.workload) != first);
        // Output flags before the command, as an older sockbench took them, still tell it.
        let parsed = Args::try_parse_from(&self.command)
            .or_else(|e| Args::command_first(&self.command).map_or(Err(e), Args::try_parse_from));
        let kind = match parsed.map(|a| a.command) {
            Ok(Some(Command::Stream(_))) => Kind::Stream,
            Ok(Some(Command::Pingpong(_))) => Kind::Pingpong,
            Ok(Some(Command::Rate(_))) => Kind::Rate,
            Ok(Some(Command::Connect(_))) => Kind::Connect,
            Ok(_) => Kind::Suite,
            Err(_) => match first {
                Some(w) if !mixed => Kind::of_workload(w),
                _ => Kind::Suite,
            },
        };
        let layout = kind.layout();
        let rankings = crate::report::rankings::of(&self.results, layout);
        Report {
            schema_version: SCHEMA_VERSION,
            tool: self.tool,
            kind,
            command: self.command,
            environment: Some(self.environment),
            started_at: None,
            ended_at: None,
            placement: self.placement,
            results: self.results,
            skipped: self.skipped,
            warnings: self.warnings,
            interrupted: self.interrupted,
            error: self.error,
            rankings,
            layout,
        }
    }
}

/// The kind of a command's document of its own, by its mark (`sockbench-relay`); the
/// mesh's has none (its `tool` is a string).
pub fn own_kind(value: &Value) -> Option<Kind> {
    match value.get("document").and_then(Value::as_str) {
        Some(mark) => {
            let name = mark.strip_prefix("sockbench-")?;
            Kind::ALL.into_iter().find(|k| k.name() == name)
        }
        None => value
            .get("tool")
            .and_then(Value::as_str)
            .filter(|t| t.starts_with("sockbench"))
            .map(|_| Kind::Mesh),
    }
}

/// The versions of each kind's own document that read: the last before the one document.
fn readable(kind: Kind, version: u64) -> bool {
    match kind {
        Kind::Serve | Kind::Compare => version == 2,
        Kind::Relay | Kind::Swarm | Kind::Load | Kind::Models | Kind::Mesh => version == 1,
        _ => false,
    }
}

/// A command's document of its own as this version's document.
///
/// # Errors
/// A version of the kind that does not read, or a document that is not whole.
pub fn read_own(kind: Kind, mut value: Value) -> anyhow::Result<Document> {
    let version = value
        .get("schema_version")
        .and_then(Value::as_u64)
        .unwrap_or(0);
    anyhow::ensure!(
        readable(kind, version),
        "a {kind} document of schema version {version}, which this sockbench does not read"
    );
    let Some(o) = value.as_object_mut() else {
        anyhow::bail!("not a JSON object");
    };
    let text = |v: Option<Value>| v.and_then(|v| v.as_str().map(String::from));
    let list = |v: Option<Value>| -> Vec<String> {
        v.and_then(|v| serde_json::from_value(v).ok())
            .unwrap_or_default()
    };
    let tool = match o.remove("tool") {
        Some(Value::String(t)) => Tool {
            name: "sockbench".into(),
            version: t.trim_start_matches("sockbench").trim().to_string(),
        },
        Some(t) => serde_json::from_value(t).unwrap_or_else(|_| unknown_tool()),
        None => unknown_tool(),
    };
    let mut warnings = list(o.remove("warnings"));
    warnings.extend(list(o.remove("notes")));
    let envelope = Envelope {
        tool,
        schema_version: SCHEMA_VERSION,
        command: list(o.remove("command")),
        environment: None,
        started_at: None,
        ended_at: None,
        interrupted: o
            .remove("interrupted")
            .and_then(|v| v.as_bool())
            .unwrap_or(false),
        error: text(o.remove("error")),
        warnings,
    };
    for k in ["document", "schema_version", "kernel"] {
        o.remove(k);
    }
    let body = match kind {
        Kind::Relay => {
            o.insert("rankings".into(), Value::Array(Vec::new()));
            let mut b: crate::document::relay::RelayBody = serde_json::from_value(value)?;
            b.rankings = crate::document::relay::rankings(&b.results, b.mode);
            Body::Relay(Box::new(b))
        }
        Kind::Models => {
            o.insert("ranking".into(), Value::Null);
            let mut b: crate::document::models::ModelsBody = serde_json::from_value(value)?;
            b.ranking = crate::document::models::ranking(&b.rows);
            Body::Models(Box::new(b))
        }
        Kind::Compare => {
            for c in o
                .get_mut("comparisons")
                .and_then(Value::as_array_mut)
                .into_iter()
                .flatten()
            {
                let workload = c.get("workload").cloned();
                let kind = workload
                    .and_then(|w| serde_json::from_value(w).ok())
                    .map_or(Kind::Suite, Kind::of_workload);
                let quantity = match c.get("figure").and_then(Value::as_str) {
                    Some("bits_per_second") => "throughput",
                    Some("round_trip_p50_ns") => "latency",
                    _ => "rate",
                };
                if let Some(c) = c.as_object_mut() {
                    c.insert("kind".into(), kind.name().into());
                    c.insert("quantity".into(), quantity.into());
                }
            }
            Body::Compare(Box::new(serde_json::from_value(value)?))
        }
        Kind::Swarm => Body::Swarm(Box::new(serde_json::from_value(value)?)),
        Kind::Load => Body::Load(Box::new(serde_json::from_value(value)?)),
        Kind::Serve => Body::Serve(Box::new(serde_json::from_value(value)?)),
        Kind::Mesh => Body::Mesh(Box::new(serde_json::from_value(value)?)),
        other => anyhow::bail!("a {other} document is not one of a command's own"),
    };
    Ok(Document { envelope, body })
}

/// The summary of a `listen --format json` log (JSON Lines, the summary last): today's
/// summary is a document as it stands; an older one (`connections` alone) is read with
/// the transport and address of the log's first line.
pub fn listen_log(text: &[u8]) -> Option<Document> {
    let text = std::str::from_utf8(text).ok()?;
    let lines: Vec<Value> = (text.lines())
        .filter(|l| !l.trim().is_empty())
        .map(serde_json::from_str)
        .collect::<Result<_, _>>()
        .ok()?;
    let last = lines.last()?;
    if last.get("event").and_then(Value::as_str) != Some("summary") {
        return None;
    }
    if last.get("kind").is_some() {
        return serde_json::from_value(last.clone()).ok();
    }
    let first = lines.first()?;
    let field = |k: &str| {
        first
            .get(k)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    let connections = serde_json::from_value(last.get("connections")?.clone()).ok()?;
    let body = crate::document::listen::ListenBody {
        transport: field("transport"),
        address: field("address"),
        connections,
    };
    Some(Document {
        envelope: Envelope {
            tool: unknown_tool(),
            schema_version: SCHEMA_VERSION,
            command: Vec::new(),
            environment: None,
            started_at: None,
            ended_at: None,
            interrupted: false,
            error: None,
            warnings: Vec::new(),
        },
        body: Body::Listen(Box::new(body)),
    })
}

/// The tool of a document that did not name its version.
fn unknown_tool() -> Tool {
    Tool {
        name: "sockbench".into(),
        version: "unknown".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::sample;
    use crate::scenario::Layout;

    /// `r` as version 8 wrote it: the envelope and the body side by side, no kind.
    fn v8(r: &Report, command: &[&str]) -> BenchV8 {
        let mut v = serde_json::to_value(r).unwrap();
        let body = v["body"].take();
        let o = v.as_object_mut().unwrap();
        for k in ["kind", "body", "started_at", "ended_at"] {
            o.remove(k);
        }
        for (k, x) in body.as_object().unwrap() {
            o.insert(k.clone(), x.clone());
        }
        o.insert("schema_version".into(), 8.into());
        o.insert("command".into(), serde_json::json!(command));
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn an_old_report_takes_its_kind_from_its_command_line_or_else_its_workloads() {
        let suite = sample::suite();
        let list = sample::stream();
        let read = |r: &Report, c: &[&str]| v8(r, c).into_report();
        let got = read(&suite, &["sockbench"]);
        assert_eq!((got.kind, got.layout), (Kind::Suite, Layout::Suite));
        let got = read(&suite, &["sockbench", "suite", "-d", "1"]);
        assert_eq!((got.kind, got.layout), (Kind::Suite, Layout::Suite));
        let got = read(&list, &["sockbench", "stream", "-t", "tcp"]);
        assert_eq!((got.kind, got.layout), (Kind::Stream, Layout::List));
        let got = read(
            &list,
            &["sockbench", "--format", "json", "rate", "-t", "udp"],
        );
        assert_eq!(got.kind, Kind::Rate);
        // A command line this version cannot parse: the results decide.
        let future = ["sockbench", "--from-the-future"];
        assert_eq!(read(&suite, &future).kind, Kind::Suite);
        assert_eq!(read(&list, &future).kind, Kind::Stream);
        // Read as this version: the figures whole, the times unknown.
        let got = read(&list, &["sockbench", "stream"]);
        assert_eq!(got.schema_version, SCHEMA_VERSION);
        assert_eq!(got.started_at, None);
        assert_eq!(
            serde_json::to_value(&got.results).unwrap(),
            serde_json::to_value(&list.results).unwrap()
        );
    }

    #[test]
    fn an_old_report_is_ranked_by_todays_rule_whatever_rankings_it_held() {
        let suite = sample::suite();
        let mut v = serde_json::to_value(&suite).unwrap();
        let body = v["body"].take();
        let o = v.as_object_mut().unwrap();
        for k in ["kind", "body", "started_at", "ended_at"] {
            o.remove(k);
        }
        o.extend(body.as_object().unwrap().clone());
        o.insert("schema_version".into(), 8.into());
        o.insert("command".into(), serde_json::json!(["sockbench"]));
        // Version 8's rankings had no `quantity`; some had none at all.
        for r in v["rankings"].as_array_mut().unwrap() {
            r.as_object_mut().unwrap().remove("quantity");
        }
        let want = crate::report::rankings::of(&suite.results, Layout::Suite);
        assert!(!want.is_empty());
        let got = serde_json::from_value::<BenchV8>(v.clone()).unwrap();
        assert_eq!(got.into_report().rankings, want);
        v["rankings"] = serde_json::json!([]);
        let got = serde_json::from_value::<BenchV8>(v).unwrap();
        assert_eq!(got.into_report().rankings, want);
    }
}
