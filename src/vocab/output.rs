//! How a command's output is asked for: the format, and how tables for people present
//! figures.

use clap::ValueEnum;

/// Output formats.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// A table for people, units chosen to read well.
    #[default]
    Table,
    /// The versioned JSON document (schema/document.schema.json), exact values in base units.
    Json,
    /// One row per scenario, exact values in base units.
    Csv,
    /// A Markdown table.
    Markdown,
    /// One self-contained HTML page: SVG charts (throughput against size, latency
    /// percentiles, histograms, bars per engine) and every table; opens offline.
    Html,
    /// The OpenMetrics text format (Prometheus naming, base units), for a node
    /// exporter's textfile collector or a push gateway.
    Openmetrics,
}

/// How the tables for people present figures (`--wide`, `--units`). JSON and CSV are
/// exact, in base units, and ignore it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct View {
    /// Every column, however wide the table gets (default: fit 100 columns).
    pub wide: bool,
    /// Throughput in bits or bytes per second, or both.
    pub units: Units,
    /// One row per placement (same CPU, across CPUs) of each scenario.
    pub by_placement: bool,
}

/// The unit of throughput in tables.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub enum Units {
    /// Bits per second, SI (1 Gbit/s = 10^9 bit/s), as iperf3 and network gear count.
    #[default]
    Bits,
    /// Bytes per second, binary (1 GiB/s = 2^30 B/s), as file and memory tools count.
    Bytes,
    /// Both, side by side.
    Both,
}
