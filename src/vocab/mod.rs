//! The words every floor shares: what a command's output is asked to be ([`Format`],
//! [`View`], [`Units`]), how `stream` sends and receives ([`SendMethod`],
//! [`RecvMethod`]), how sizes, durations and rates are parsed and printed ([`units`]),
//! and how text sockbench did not write is made safe to show ([`text`]). This room is on the ground floor: it uses nothing of the crate, and every
//! room may use it (tests/floors.rs holds the map).

mod methods;
mod output;
pub mod text;
pub mod units;

pub use methods::{RecvMethod, SendMethod};
pub use output::{Format, Units, View};
