//! How `stream` hands bytes to the kernel and takes them back.

use clap::ValueEnum;

/// How `stream` sends.
#[derive(
    Clone,
    Copy,
    Debug,
    Default,
    PartialEq,
    Eq,
    ValueEnum,
    serde::Serialize,
    serde::Deserialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum SendMethod {
    /// write(2)/send(2) from a buffer (through the engine).
    #[default]
    Write,
    /// sendfile(2) from a file of SIZE bytes on tmpfs.
    Sendfile,
    /// splice(2) from a pipe whose pages were vmsplice'd from a buffer.
    Splice,
    /// send(2) with MSG_ZEROCOPY, completions reaped from the socket's error queue.
    Zerocopy,
}

/// How `stream` receives.
#[derive(
    Clone,
    Copy,
    Debug,
    Default,
    PartialEq,
    Eq,
    ValueEnum,
    serde::Serialize,
    serde::Deserialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum RecvMethod {
    /// read(2)/recv(2) into a buffer (through the engine).
    #[default]
    Read,
    /// TCP_ZEROCOPY_RECEIVE: the received pages mapped into the receiver, not copied.
    Zerocopy,
}
