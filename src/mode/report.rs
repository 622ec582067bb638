//! `sockbench report FILE.json`: print a saved document again, whatever command wrote
//! it, in any format, with `--wide` and `--units`, and write the `--export-*` files from
//! it. Nothing is measured.

use crate::cli::ReportArgs;
use crate::document::{Body, Document};
use crate::error::{CommandResult, Error, Outcome};
use crate::report::{Report, OLDEST_DOCUMENT, SCHEMA_VERSION};
use std::path::Path;

/// Read, check and print a saved document, of any kind.
///
/// # Errors
/// A file that cannot be read as a document (a failure), an export that cannot be
/// written (a usage error).
pub fn run(r: &ReportArgs) -> CommandResult {
    let doc = load_document(&r.file)
        .map_err(|e| Error::failed(format!("{e:#}")))
        .map(rendered)?;
    // What the run that wrote it said on its stderr, said again: a table of zeros from a
    // run that failed must not pass for a measurement.
    let head = doc.head();
    let name = crate::vocab::text::terminal(&r.file.display().to_string());
    if let Some(e) = head.error {
        eprintln!(
            "sockbench: note: the run {name} records failed: {}",
            crate::vocab::text::terminal(e)
        );
    }
    if head.interrupted {
        eprintln!("sockbench: note: the run {name} records was interrupted (Ctrl-C): its figures cover what ran");
    }
    let exports = super::exports_viewed(&r.output, r.output.view_by(r.by_placement))?;
    exports.finish(doc.as_ref());
    Ok(Outcome::done().and_errors(super::emit(doc.as_ref(), &r.output, &exports)))
}

/// A document as every output reads it: its kind's own report, whatever the kind
/// (`sockbench report FILE` prints any document in any format this way).
fn rendered(doc: Document) -> Box<dyn crate::report::output::Rendered> {
    let envelope = doc.envelope;
    match doc.body {
        Body::Stream(_) | Body::Pingpong(_) | Body::Rate(_) | Body::Connect(_) | Body::Suite(_) => {
            let doc = Document {
                envelope,
                body: doc.body,
            };
            match crate::report::Report::try_from(doc) {
                Ok(r) => Box::new(r),
                Err(e) => unreachable!("a measuring command's body is a report: {e}"),
            }
        }
        Body::Relay(body) => Box::new(crate::document::relay::RelayReport {
            envelope,
            body: *body,
        }),
        Body::Swarm(body) => Box::new(crate::document::swarm::SwarmReport {
            envelope,
            body: *body,
        }),
        Body::Load(body) => Box::new(crate::load::LoadReport {
            envelope,
            body: *body,
        }),
        Body::Serve(body) => Box::new(crate::document::serve::ServeReport {
            envelope,
            body: *body,
        }),
        Body::Models(body) => Box::new(crate::document::models::ModelsReport {
            envelope,
            body: *body,
        }),
        Body::Mesh(body) => Box::new(crate::mesh::report::MeshReport {
            envelope,
            body: *body,
        }),
        Body::Listen(body) => Box::new(crate::document::listen::ListenReport {
            envelope,
            body: *body,
        }),
        Body::Compare(body) => Box::new(crate::document::compare::CompareReport {
            envelope,
            body: *body,
        }),
    }
}

/// Read a document from `path` ("-": stdin) and check it is one this sockbench can
/// read: this version's, of a kind it renders, or an older bench report (versions 4 to
/// 8, converted by [`crate::document::legacy`]). At most [`crate::input::REPORT`]'s
/// 256 MiB are read, and a path must name a regular file (a FIFO or a device is refused:
/// pipe it to `-` instead).
///
/// # Errors
/// If the file cannot be read, is not a regular file, is over 256 MiB, is not JSON, is
/// of a version or kind this sockbench does not read, or not a document.
pub fn load(path: &Path) -> anyhow::Result<Report> {
    let doc = load_document(path)?;
    Report::try_from(doc).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))
}

/// Read a document of any kind from `path` ("-": stdin), as [`load`] does; an older
/// bench report (versions 4 to 8) is converted to this version's document.
///
/// # Errors
/// As [`load`], but a document of any kind is read.
pub fn load_document(path: &Path) -> anyhow::Result<Document> {
    use crate::document::legacy::{BenchV8, LAST_BENCH, OLDEST_BENCH};
    use anyhow::Context;
    let name = path.display();
    let text = if path == Path::new("-") {
        crate::input::read_stdin(crate::input::REPORT)?
    } else {
        crate::input::read_file(path, crate::input::REPORT)?
    };
    let value: serde_json::Value = match serde_json::from_slice(&text) {
        Ok(v) => v,
        // A `listen --format json` log: its last line, the summary, is the document.
        Err(e) => match crate::document::legacy::listen_log(&text) {
            Some(doc) => return Ok(doc),
            None => {
                return Err(e).with_context(|| {
                    format!(
                        "{name} is not JSON: give a document written by --format json or \
                         --export-json"
                    )
                })
            }
        },
    };
    let version = value
        .get("schema_version")
        .and_then(serde_json::Value::as_u64);
    let Some(version) = version else {
        anyhow::bail!(
            "{name} is not a sockbench document (no schema_version): give one written by --format json \
             or --export-json"
        );
    };
    let this = env!("CARGO_PKG_VERSION");
    if value.get("kind").is_some() {
        if !(u64::from(OLDEST_DOCUMENT)..=u64::from(SCHEMA_VERSION)).contains(&version) {
            anyhow::bail!(
                "{name} is a document of schema version {version}; this sockbench {this} reads versions \
                 {OLDEST_DOCUMENT} to {SCHEMA_VERSION} (and bench reports of versions {OLDEST_BENCH} to {LAST_BENCH}): print it \
                 with the sockbench that wrote it, or run the measurement again"
            );
        }
        let doc: Document = serde_json::from_value(value)
            .with_context(|| format!("{name} is not a complete sockbench document"))?;
        return Ok(doc);
    }
    if let Some(kind) = crate::document::legacy::own_kind(&value) {
        return crate::document::legacy::read_own(kind, value).map_err(|e| {
            anyhow::anyhow!(
                "{name}: {e:#}: print it with the sockbench that wrote it, or run the measurement \
                 again"
            )
        });
    }
    if let Some(kind) = value.get("document").and_then(serde_json::Value::as_str) {
        anyhow::bail!(
            "{name} is a {} document of schema version {version}, which this sockbench {this} does not \
             read: print it with the sockbench that wrote it",
            crate::vocab::text::terminal(kind)
        );
    }
    if !(u64::from(OLDEST_BENCH)..=u64::from(LAST_BENCH)).contains(&version) {
        anyhow::bail!(
            "{name} is a report of schema version {version}; this sockbench {this} reads versions \
             {OLDEST_DOCUMENT} to {SCHEMA_VERSION} (and bench reports of versions {OLDEST_BENCH} to {LAST_BENCH}): print it \
             with the sockbench that wrote it, or run the measurement again"
        );
    }
    let old: BenchV8 = serde_json::from_value(value)
        .with_context(|| format!("{name} is not a complete sockbench report"))?;
    Ok(Document::from(old.into_report()))
}
