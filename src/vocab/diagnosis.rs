//! The warnings a workload may declare beyond those every workload gets (`diagnose`
//! has one function for each).

/// Warnings a workload may declare beyond those that apply to every workload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Diagnosis {
    /// A one-way side busy a whole core: the figure is the CPU's limit.
    CpuSaturated,
    /// ~40 ms round trips from Nagle's algorithm meeting delayed ACKs.
    DelayedAck,
    /// Runs whose median round trip differs by a factor (one CPU or two), and a single
    /// short run said to be one.
    LatencyRunsDisagree,
    /// MSG_ZEROCOPY sends the kernel copied anyway, or whose completion never came.
    ZerocopyCopied,
}
