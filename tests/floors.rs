//! The floors of the crate: every `crate::` path in `src/` points down the map below, never
//! up and never across a floor (two rooms on one floor do not know each other). A room is
//! a top-level module of `src/` (`src/NAME.rs` or `src/NAME/`); `lib.rs` and `main.rs`
//! stand above every floor.
//!
//! The map is the architecture's ("imports only point down"): the ground holds the words
//! every floor shares and the only unsafe code; the modes sit at the top. `KNOWN` lists the
//! arrows that still point the wrong way, each a move still to make; an arrow fixed must
//! leave the list (the test says so), and a new one fails the test with the file and the
//! path that made it.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::Path;

/// Bottom floor first. A room may use the rooms of the floors below its own.
const FLOORS: &[&[&str]] = &[
    // The ground: shared words and facts, no I/O machinery.
    &["vocab", "text", "error", "input", "environment"],
    // The only unsafe code; calls nothing above the words.
    &["sys"],
    // Process-wide switches: Ctrl-C, then the test build's hooks (which watch Ctrl-C).
    &["interrupt"],
    &["testhooks"],
    // What is measured and what carries the bytes.
    &["measure", "transport"],
    // How the bytes move: per-connection engines, the readiness loop, the copy methods.
    &["engine", "reactor", "copy"],
    // What one measured case asks for, in the machinery's words.
    &["scenario"],
    // The figures of a scenario and its runs, as everything above reads them.
    &["results"],
    // What the roles do, and HTTP framing.
    &["workload", "http"],
    // The protocol between a client and a server; the diagnoses a result earns.
    &["control", "diagnose"],
    // From what the roles reported to a run's and a scenario's figures; the report's
    // machinery (tables, charts, exporters, the envelope) and the measuring commands'
    // report.
    &["figures", "report"],
    // Features on the machinery: server models, the load generator, the mesh.
    &["model", "load", "mesh"],
    // The flags as parsed, then the checked plan.
    &["cli"],
    &["plan"],
    // Where roles run, the scenario loop.
    &["placement"],
    &["runner"],
    // The one document read back whatever its kind, and the bodies of the commands
    // that have no room of their own below.
    &["document"],
    // One file per command.
    &["mode"],
];

/// Arrows allowed to point up or across (from room, to room) while a move is under way:
/// none are left. One added here must still occur, and leaves when its move is made.
const KNOWN: &[(&str, &str)] = &[];

fn floor_of(room: &str) -> Option<usize> {
    FLOORS.iter().position(|f| f.contains(&room))
}

/// The room a source file belongs to, from its path under `src/`.
fn room_of(rel: &Path) -> Option<String> {
    let first = rel.components().next()?.as_os_str().to_str()?;
    let room = first.strip_suffix(".rs").unwrap_or(first);
    (!matches!(room, "lib" | "main")).then(|| room.to_string())
}

/// The text of a file without its comments (line, doc and block comments), so a doc link
/// to another room is not an import. String literals are kept as they are.
fn code_of(src: &str) -> String {
    let b = src.as_bytes();
    let mut out = String::with_capacity(src.len());
    let mut i = 0;
    let mut in_str = false;
    while i < b.len() {
        let c = b[i];
        if in_str {
            if c == b'\\' && i + 1 < b.len() {
                out.push_str(&src[i..i + 2]);
                i += 2;
                continue;
            }
            if c == b'"' {
                in_str = false;
            }
        } else if c == b'"' {
            // A char literal of a quote ('"') opens no string.
            if !(i > 0 && b[i - 1] == b'\'' && b.get(i + 1) == Some(&b'\'')) {
                in_str = true;
            }
        } else if src[i..].starts_with("//") {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
            continue;
        } else if src[i..].starts_with("/*") {
            let mut depth = 0;
            while i < b.len() {
                if src[i..].starts_with("/*") {
                    depth += 1;
                    i += 2;
                } else if src[i..].starts_with("*/") {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
            continue;
        }
        let ch = src[i..].chars().next().expect("inside the text");
        out.push(ch);
        i += ch.len_utf8();
    }
    out
}

/// The rooms a file's code names through `crate::` (`crate::a::b`, and each item of
/// `crate::{a::b, c}`), each with the path as written.
fn rooms_named(code: &str) -> Vec<(String, String)> {
    let mut found = Vec::new();
    let mut at = 0;
    while let Some(pos) = code[at..].find("crate::") {
        let start = at + pos;
        at = start + "crate::".len();
        let before = code[..start].chars().next_back();
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '$') {
            continue;
        }
        let rest = &code[at..];
        if let Some(group) = rest.strip_prefix('{') {
            let mut depth = 1;
            let mut item_start = 0;
            let mut items = Vec::new();
            for (j, c) in group.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 1 => {
                        items.push(&group[item_start..j]);
                        break;
                    }
                    '}' => depth -= 1,
                    ',' if depth == 1 => {
                        items.push(&group[item_start..j]);
                        item_start = j + 1;
                    }
                    _ => {}
                }
            }
            for item in items {
                let item = item.trim();
                let name = ident_at(item);
                if !name.is_empty() {
                    found.push((name.to_string(), format!("crate::{item}")));
                }
            }
        } else {
            let name = ident_at(rest);
            let path_len = rest
                .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
                .unwrap_or(rest.len());
            if !name.is_empty() {
                found.push((name.to_string(), format!("crate::{}", &rest[..path_len])));
            }
        }
    }
    found
}

fn ident_at(s: &str) -> &str {
    let end = s
        .find(|c: char| !(c.is_alphanumeric() || c == '_'))
        .unwrap_or(s.len());
    &s[..end]
}

/// Every arrow between rooms: (from, to) -> the first place it is made ("file: path").
fn arrows(files: &[(String, String)]) -> BTreeMap<(String, String), String> {
    let mut arrows = BTreeMap::new();
    for (rel, src) in files {
        let Some(from) = room_of(Path::new(rel)) else {
            continue;
        };
        for (to, path) in rooms_named(&code_of(src)) {
            if to != from && !matches!(to.as_str(), "self" | "super") {
                arrows
                    .entry((from.clone(), to))
                    .or_insert_with(|| format!("{rel}: {path}"));
            }
        }
    }
    arrows
}

/// What is wrong with the crate's imports, one line each; empty when every arrow points
/// down or is known.
fn problems(files: &[(String, String)], known: &[(&str, &str)]) -> Vec<String> {
    let arrows = arrows(files);
    let mut problems = Vec::new();
    let rooms: BTreeSet<String> = files
        .iter()
        .filter_map(|(rel, _)| room_of(Path::new(rel)))
        .collect();
    for room in &rooms {
        if floor_of(room).is_none() {
            problems.push(format!(
                "room `{room}` is on no floor: add it to FLOORS in tests/floors.rs"
            ));
        }
    }
    for ((from, to), place) in &arrows {
        let (Some(f), Some(t)) = (floor_of(from), floor_of(to)) else {
            continue;
        };
        let is_known = known.iter().any(|&(a, b)| a == from && b == to);
        if t >= f && !is_known {
            let way = if t == f { "across its floor" } else { "up" };
            problems.push(format!("{from} -> {to} points {way}: {place}"));
        }
    }
    for &(from, to) in known {
        if !arrows.contains_key(&(from.to_string(), to.to_string())) {
            problems.push(format!(
                "{from} -> {to} no longer occurs: remove it from KNOWN in tests/floors.rs"
            ));
        } else if let (Some(f), Some(t)) = (floor_of(from), floor_of(to)) {
            if t < f {
                problems.push(format!(
                    "{from} -> {to} points down now: remove it from KNOWN in tests/floors.rs"
                ));
            }
        }
    }
    problems
}

fn sources(dir: &Path, base: &Path, out: &mut Vec<(String, String)>) {
    for entry in fs::read_dir(dir).expect("src/ is readable") {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            sources(&path, base, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            let rel = path.strip_prefix(base).expect("under src/");
            let text = fs::read_to_string(&path).expect("a source file is UTF-8");
            out.push((rel.to_string_lossy().into_owned(), text));
        }
    }
}

fn crate_sources() -> Vec<(String, String)> {
    let base = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    sources(&base, &base, &mut files);
    files.sort();
    files
}

#[test]
fn every_import_points_down_the_floors() {
    let files = crate_sources();
    assert!(files.len() > 100, "read only {} files of src/", files.len());
    let problems = problems(&files, KNOWN);
    assert!(
        problems.is_empty(),
        "the floors are broken ({} found):\n{}",
        problems.len(),
        problems.join("\n")
    );
}

#[test]
fn an_upward_or_sideways_import_is_caught_and_a_downward_one_is_not() {
    let file = |rel: &str, src: &str| (rel.to_string(), src.to_string());
    let files = vec![
        file("sys/mod.rs", "use crate::mode::bench::run;\n"),
        file(
            "transport/tcp.rs",
            "use crate::{measure::units, vocab::Format};\n",
        ),
        file("measure/x.rs", "fn f() { crate::transport::listen(); }\n"),
        file(
            "mode/x.rs",
            "use crate::{runner::Runner, sys::{self, wait}};\n",
        ),
    ];
    let found = problems(&files, &[]);
    assert_eq!(
        found,
        vec![
            "measure -> transport points across its floor: measure/x.rs: crate::transport::listen"
                .to_string(),
            "sys -> mode points up: sys/mod.rs: crate::mode::bench::run".to_string(),
            "transport -> measure points across its floor: transport/tcp.rs: crate::measure::units"
                .to_string(),
        ]
    );
    // Known arrows are let through, and a known arrow that no longer occurs is reported.
    let found = problems(
        &files,
        &[
            ("sys", "mode"),
            ("transport", "measure"),
            ("measure", "transport"),
            ("copy", "workload"),
        ],
    );
    assert_eq!(
        found,
        vec!["copy -> workload no longer occurs: remove it from KNOWN in tests/floors.rs"]
    );
    // A known arrow the map now lets through (the floors were moved) must leave the list.
    let found = problems(
        &files,
        &[
            ("sys", "mode"),
            ("transport", "measure"),
            ("measure", "transport"),
            ("mode", "runner"),
        ],
    );
    assert_eq!(
        found,
        vec!["mode -> runner points down now: remove it from KNOWN in tests/floors.rs"]
    );
}

#[test]
fn comments_and_doc_links_are_not_imports_but_strings_stay_code() {
    let code = code_of(
        "/// See [`crate::mode`].\nuse crate::sys; // crate::report\n/* crate::runner /* nested */ */\nlet s = \"// not a comment\"; let q = '\"'; crate::measure::x();\n",
    );
    let rooms: Vec<String> = rooms_named(&code).into_iter().map(|(r, _)| r).collect();
    assert_eq!(rooms, vec!["sys", "measure"]);
    let named =
        rooms_named("use $crate::x; use my_crate::y; use crate::{a, b::{c, d}, e::f as g};");
    let rooms: Vec<&str> = named.iter().map(|(r, _)| r.as_str()).collect();
    assert_eq!(rooms, vec!["a", "b", "e"]);
}

#[test]
fn a_new_room_must_be_put_on_a_floor() {
    let files = vec![("attic/mod.rs".to_string(), String::new())];
    assert_eq!(
        problems(&files, &[]),
        vec!["room `attic` is on no floor: add it to FLOORS in tests/floors.rs"]
    );
}
