//! sockbench: measure inter-process and network communication on Linux.
//!
//! The crate is laid out by concern, one room per axis; a new workload, transport or
//! engine is one file plus one enum line:
//!
//! - [`mode`]: one file per top-level command, each owning its flow (`bench` for the
//!   measuring commands, `suite`, `report`); `main` only parses and dispatches;
//! - [`cli`]: the flags, as clap parses them; [`plan`]: the checked plan built from them,
//!   with the machine's limits probed once ([`plan::Host`]) and the one refusal rule
//!   ([`plan::matrix`]: a combination named explicitly is an error, under `all` a skip);
//! - [`transport`]: what carries the bytes (Unix sockets, TCP, UDP, pipes, FIFOs, message
//!   queues, shared memory), each able to listen and connect separately;
//! - [`engine`]: how sends and receives reach the kernel;
//! - [`workload`]: what the roles do; each workload declares in its own file
//!   ([`workload::Spec`]) how it is wired, what it refuses, its roles, how its figures are
//!   counted and which diagnoses apply; [`workload::Meter`] is what every role measures
//!   the same way;
//! - [`placement`]: where the roles of a run execute ([`placement::Placement`]; threads
//!   of this process today), bringing back each role's own report;
//! - [`runner`]: the scenario loop (warm-up, runs, exports after each scenario);
//! - [`measure`]: CPU accounting, statistics, units, and the figures of a run;
//! - [`diagnose`]: one function per warning kind;
//! - [`report`]: the report (serialized and read back) and its exporters (table, JSON,
//!   CSV, Markdown), which know neither the plan nor the CLI;
//! - [`copy`]: the ways a relay copies between sockets, one file per method;
//! - [`text`]: text from elsewhere (peers, files) made safe for a terminal or Markdown;
//! - [`input`]: the one way a file the user names (a report, a key, a hosts file) is
//!   read: regular files only, never past a bound;
//! - `sys`: the only module allowed `unsafe`.
//!
//! Data flows one way: `Args` → command → [`plan::Host::probe`] → [`plan::Plan`] → per
//! scenario, [`placement::Placement::run`] → role reports → workload tally + common
//! figures → diagnoses → [`report::ScenarioResult`] → exporters.

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
pub mod engine;
pub mod environment;
pub mod error;
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
pub mod runner;
#[allow(unsafe_code)]
pub(crate) mod sys;
pub mod testhooks;
pub mod text;
pub mod transport;
pub mod workload;
