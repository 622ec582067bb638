//! Where a run's socket files and FIFOs go: `--path`, or a private directory that lives
//! only while the run opens its transports, and the bounds a Unix socket path must keep.

use std::path::PathBuf;

use anyhow::Context;

/// Longest Unix socket path Linux accepts (`sun_path` is 108 bytes with the final NUL).
pub const UNIX_PATH_MAX: usize = 107;

/// The longest file name a transport creates inside the run directory.
pub const LONGEST_FILE_NAME: usize = "sb4194304-dgram-99999999.reply.sock".len();

/// What a private run directory adds to its base: "/sockbench-XXXXXX", a slash and the
/// longest file name.
pub const RUN_DIR_OVERHEAD: usize = "/sockbench-4194304-XXXXXX".len() + 1 + LONGEST_FILE_NAME;

/// The directory a run would use for socket files when `--path` is not given:
/// $XDG_RUNTIME_DIR if it is writable and socket paths under it fit, else the temporary
/// directory.
pub fn default_dir_base() -> PathBuf {
    std::env::var_os("XDG_RUNTIME_DIR")
        .map(PathBuf::from)
        .filter(|p| {
            p.is_dir()
                && p.as_os_str().len() + RUN_DIR_OVERHEAD <= UNIX_PATH_MAX
                && nix::unistd::access(p, nix::unistd::AccessFlags::W_OK).is_ok()
        })
        .unwrap_or_else(std::env::temp_dir)
}

/// Where one run makes its socket files and FIFOs: `--path`, or a private directory that
/// exists only while the run opens its transports (every name in it is removed as soon
/// as both ends are open, and then the directory goes too, so a killed run leaves
/// nothing).
pub enum RunDir {
    /// A private directory, removed when dropped.
    Private(tempfile::TempDir),
    /// `--path`, left as it is.
    User(PathBuf),
}

impl RunDir {
    /// `--path` if given, else a new private directory.
    ///
    /// # Errors
    /// The private directory cannot be made.
    pub fn open(user: Option<&PathBuf>) -> anyhow::Result<RunDir> {
        if let Some(p) = user {
            return Ok(RunDir::User(p.clone()));
        }
        let base = default_dir_base();
        tempfile::Builder::new()
            .prefix(&format!("sockbench-{}-", std::process::id()))
            .rand_bytes(6)
            .tempdir_in(&base)
            .map(RunDir::Private)
            .with_context(|| {
                format!(
                    "cannot create a private directory for socket files in {}: give a writable directory \
                     with --path (or set TMPDIR)",
                    base.display()
                )
            })
    }

    /// Where names go.
    pub fn path(&self) -> PathBuf {
        match self {
            RunDir::Private(t) => t.path().to_path_buf(),
            RunDir::User(p) => p.clone(),
        }
    }
}
