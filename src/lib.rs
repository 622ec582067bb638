//! sockbench: measure inter-process and network communication on Linux.
//!
//! The crate is laid out by concern, one room per axis; a new workload, transport or
//! engine is one file plus one enum line, and a new command one mode plus its body in the
//! one document.
//!
//! - [`mode`]: one file per top-level command, each owning its flow (`bench` for the
//!   measuring commands, `suite`, `report`, `compare`, `relay`, `swarm`, `serve`, `load`,
//!   `models`, `mesh`, `listen`, `server`); a mode returns how it ended
//!   ([`error::Outcome`]) or why it could not run ([`error::Error`]), and `main` alone
//!   says an error and picks the exit status;
//! - [`cli`]: the flags, as clap parses them; the flags that mean the same on every
//!   command (duration, warm-up, runs, transports, sizes, CPUs, output) are declared once
//!   and flattened into each command that takes them; [`plan`]: the checked plan of the
//!   measuring commands, with the machine's limits probed once ([`plan::Host`]) and the
//!   one refusal rule ([`plan::matrix`]: a combination named explicitly is an error,
//!   under `all` a skip);
//! - [`transport`]: what carries the bytes (Unix sockets, TCP, UDP, pipes, FIFOs, message
//!   queues, shared memory), each able to listen and connect separately;
//! - [`engine`]: how sends and receives reach the kernel; [`reactor`]: the readiness loop
//!   of `swarm`;
//! - [`workload`]: what the roles do; each workload declares in its own file
//!   ([`workload::Spec`]) how it is wired, what it refuses, its roles, how its figures are
//!   counted, its headline figure and which diagnoses apply; [`workload::Meter`] is what
//!   every role measures the same way;
//! - [`placement`]: where the roles of a run execute ([`placement::Placement`]: threads
//!   of this process, a child process, or a `sockbench server` on another host), bringing
//!   back each role's own report; [`control`]: the protocol between client and server;
//! - [`runner`]: the scenario loop (warm-up, runs, exports after each scenario), which
//!   `relay` and `swarm` run their workloads through too (`Runner::runs`, folding each
//!   run's role reports into their documents);
//! - [`scenario`]: what one measured case asks for ([`scenario::Scenario`], the workload
//!   kinds, the stop rule, the options only some workloads take);
//! - [`measure`]: CPU accounting, statistics, counters, histograms, the headline of each
//!   kind of figure ([`measure::headline`]); [`results`]: the figures of a scenario and
//!   its runs; [`figures`]: from what the roles reported to those figures;
//! - [`diagnose`]: one function per warning kind;
//! - [`report`]: the envelope every document shares, the measuring commands' report, and
//!   the one exporter registry: each format (table, JSON, CSV, Markdown, HTML,
//!   OpenMetrics) is written once over [`report::output::Rendered`], which every kind of
//!   document implements in its own room; [`document`]: the one document read back
//!   whatever its kind ([`document::Document`]: one envelope, a body tagged by kind, one
//!   JSON Schema; older documents read by [`document::legacy`]);
//! - [`copy`]: the ways a relay copies between sockets, one file per method;
//!   [`http`] and [`model`]: the HTTP server and its concurrency models (`serve`,
//!   `models`); [`load`]: the HTTP load generator; [`mesh`]: every pair of N hosts;
//! - [`vocab`]: the words every floor shares (output formats and views, a run's roles,
//!   stream's send and receive methods, units, who a server's peer is, the diagnoses a
//!   workload declares, [`vocab::text`]: text from elsewhere made safe for a terminal or
//!   Markdown); it uses nothing of the crate;
//! - [`input`]: the one way a file the user names (a report, a key, a hosts file) is
//!   read: regular files only, never past a bound;
//! - `sys`: the only module allowed `unsafe`.
//!
//! The rooms stand on floors, and a room uses only the floors below its own:
//! `tests/floors.rs` holds the map and fails on an import that points up or across.
//!
//! Data flows one way: `Args` → mode → (measuring commands: [`plan::Host::probe`] →
//! [`plan::Plan`] → per scenario, [`placement::Placement::run`] → role reports →
//! workload tally + common figures → diagnoses → [`results::ScenarioResult`]) → the
//! document → the exporters.

// Printing never panics. std's `eprintln!` and `println!` panic when their stream
// cannot be written (a closed pipe: `2>&1 | true`, `| head`; a full device:
// `2>/dev/full`), which would turn any run into exit 101 and skip its cleanup. These
// shadow them in every module below: a line that cannot be written is lost, and the run
// goes on to its own exit status (what must reach stdout, the report, is written with
// its errors checked).
macro_rules! eprintln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}
// (Stdout is written by the exporters, with errors checked; this one is kept so that a
// `println!` anywhere below cannot panic either.)
#[allow(unused_macros)]
macro_rules! println {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout(), $($arg)*);
    }};
}

pub mod cli;
pub mod control;
pub mod copy;
pub mod diagnose;
pub mod document;
pub mod engine;
pub mod environment;
pub mod error;
pub mod figures;
pub mod http;
pub mod input;
pub mod interrupt;
pub mod load;
pub mod measure;
pub mod mesh;
pub mod mode;
pub mod model;
pub mod placement;
pub mod plan;
pub mod reactor;
pub mod report;
pub mod results;
pub mod runner;
pub mod scenario;
#[allow(unsafe_code)]
pub(crate) mod sys;
pub mod testhooks;
pub mod transport;
pub mod vocab;
pub mod workload;
