//! `--export-json/-csv/-markdown PATH` and `--histogram PATH`: where each goes and how it
//! is written, without ever clobbering what the path names.
//!
//! A path is resolved once, before the first scenario, into one of three targets:
//!
//! - **stdout** (`-`, or a device path such as `/dev/stdout` or `/dev/fd/1` that is this
//!   process's standard output): printed with the report at the end, one document.
//! - **a regular file** (existing or new; symlinks are followed to the file they name):
//!   rewritten after every scenario, so an interrupted run loses nothing. Each rewrite
//!   goes to a fresh temporary file (random name, created exclusively, never through a
//!   symlink) in the same directory, which is then renamed over the target, so a reader
//!   never sees half a report. An existing file keeps its mode (and owner, where the
//!   process may set it); a new one gets 0666 less the umask, as any program's output.
//! - **in place**: anything that is not a regular file (a FIFO, a character device, a
//!   pipe behind `/dev/fd/N`, `/dev/stderr`) and any path under /dev or /proc. It is
//!   opened and written once, at the end: a FIFO's reader gets one whole document, and a
//!   device is never replaced by a file.
//!
//! Every target is checked before anything runs (the directory can take a new file, the
//! device is writable, no two exports name the same file). A write that still fails later
//! does not stop the run: the failure is printed, the report still goes to stdout, and
//! the exit status says it (1).

use std::cell::RefCell;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::Context;

use crate::error::PlanError;
use crate::report::exporter;
use crate::report::output::Rendered;
use crate::vocab::Format;

/// What an export writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExportKind {
    /// The report in a format (`--export-json` and friends).
    Report(Format),
    /// The latency distributions (`--histogram`).
    Histogram,
}

impl ExportKind {
    /// The flag that asked for it, for messages.
    pub fn flag(self) -> &'static str {
        match self {
            ExportKind::Report(Format::Json) => "--export-json",
            ExportKind::Report(Format::Csv) => "--export-csv",
            ExportKind::Report(Format::Markdown) => "--export-markdown",
            ExportKind::Report(Format::Html) => "--export-html",
            ExportKind::Report(Format::Openmetrics) => "--export-openmetrics",
            ExportKind::Report(Format::Table) => "--format",
            ExportKind::Histogram => "--histogram",
        }
    }
}

/// Where an export goes, as resolved before the run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    /// This process's standard output, at the end.
    Stdout,
    /// A regular file (this path, symlinks resolved), replaced atomically after every
    /// scenario.
    File(PathBuf),
    /// Something that is not a regular file, opened and written once at the end.
    InPlace(PathBuf),
}

/// One export: what, the path as given, and where it really goes.
#[derive(Clone, Debug)]
pub struct Export {
    /// What it writes.
    pub kind: ExportKind,
    /// The path as the user gave it.
    pub given: PathBuf,
    /// Where it goes.
    pub target: Target,
}

/// How many symlinks are followed before giving up (as the kernel's ELOOP limit).
const MAX_LINKS: usize = 40;
/// How long the final write waits for a FIFO's reader to appear.
const FIFO_READER_WAIT: Duration = Duration::from_secs(5);

/// Follow symlinks from `path` to the name they finally lead to (which may not exist).
/// Each link is followed only where the kernel would follow it under
/// `fs.protected_symlinks`: in a sticky, world-writable directory (/tmp), only a link of
/// this user's own or of the directory's owner. The target is then replaced by a rename,
/// which the kernel does not check, so the rule is kept here: a link another user planted
/// in /tmp never makes this process replace a file of its choosing.
fn follow_links(path: &Path) -> std::io::Result<PathBuf> {
    let mut p = path.to_path_buf();
    for _ in 0..MAX_LINKS {
        match std::fs::symlink_metadata(&p) {
            Ok(m) if m.file_type().is_symlink() => {
                may_follow(&p, &m)?;
                let to = std::fs::read_link(&p)?;
                p = match p.parent() {
                    Some(dir) if to.is_relative() => dir.join(to),
                    _ => to,
                };
            }
            _ => return Ok(p),
        }
    }
    Err(std::io::Error::from_raw_os_error(nix::libc::ELOOP))
}

/// The kernel's `may_follow_link` rule (fs/namei.c) for the link at `p`.
fn may_follow(p: &Path, link: &std::fs::Metadata) -> std::io::Result<()> {
    let dir = std::fs::metadata(parent(p))?;
    let shared = dir.mode() & 0o1002 == 0o1002; // sticky and world-writable
    let me = nix::unistd::geteuid().as_raw();
    if !shared || link.uid() == me || link.uid() == dir.uid() {
        return Ok(());
    }
    Err(std::io::Error::new(
        std::io::ErrorKind::PermissionDenied,
        format!(
            "it is a symlink of uid {} in {}, a directory anyone may write: following it is what \
             fs.protected_symlinks forbids (give the file's own path)",
            link.uid(),
            parent(p).display()
        ),
    ))
}

fn invalid(msg: String) -> PlanError {
    PlanError::Invalid(msg)
}

/// Whether `meta` is the same file as this process's standard output.
fn is_stdout(meta: &std::fs::Metadata) -> bool {
    nix::sys::stat::fstat(1).is_ok_and(|s| s.st_dev == meta.dev() && s.st_ino == meta.ino())
}

/// Resolve one path into its target and check it can be written.
fn resolve(kind: ExportKind, given: &Path) -> Result<Target, PlanError> {
    let flag = kind.flag();
    if given.as_os_str() == "-" {
        return match kind {
            ExportKind::Histogram => Err(invalid(
                "--histogram -: the histogram goes to a file; give a path".into(),
            )),
            ExportKind::Report(_) => Ok(Target::Stdout),
        };
    }
    let shown = given.display();
    // /dev/stdout, /dev/fd/N and /proc/self/fd/N are magic links the kernel resolves
    // itself (to "pipe:[1234]" and the like): never followed by hand.
    let under_system = |p: &Path| ["/dev/", "/proc/"].iter().any(|s| p.starts_with(s));
    let path = if under_system(given) {
        given.to_path_buf()
    } else {
        follow_links(given)
            .map_err(|e| invalid(format!("{flag} {shown}: cannot follow the symlink: {e}")))?
    };
    let system = under_system(&path);
    match std::fs::metadata(&path) {
        Ok(m) if m.is_dir() => Err(invalid(format!(
            "{flag} {shown}: it is a directory; give a file name"
        ))),
        // Writing a report in place would overwrite a disk's data; a socket cannot be
        // opened at all.
        Ok(m) if m.file_type().is_block_device() => Err(invalid(format!(
            "{flag} {shown}: it is a block device, and writing a report there would overwrite its data; \
             give a file name"
        ))),
        Ok(m) if m.file_type().is_socket() => Err(invalid(format!(
            "{flag} {shown}: it is a socket, which cannot be written as a file; give a file name"
        ))),
        Ok(m) if !m.is_file() || system => {
            if is_stdout(&m) {
                return Ok(Target::Stdout);
            }
            // A regular file under /proc or /sys is a kernel setting or status, unless it
            // is one of this process's own descriptors (/dev/stderr, /proc/self/fd/N).
            let descriptor = ["/dev/stdout", "/dev/stderr"].iter().any(|d| given == Path::new(d))
                || given.to_string_lossy().contains("/fd/");
            if m.is_file() && !descriptor {
                return Err(invalid(format!(
                    "{flag} {shown}: it is a kernel file, not a place for a report; give a file name"
                )));
            }
            nix::unistd::access(&path, nix::unistd::AccessFlags::W_OK).map_err(|e| {
                invalid(format!(
                    "{flag} {shown}: cannot write to it ({}): choose a path you may write",
                    e.desc()
                ))
            })?;
            Ok(Target::InPlace(path))
        }
        Ok(_) => {
            check_dir_takes_a_file(flag, given, &path)?;
            Ok(Target::File(path))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let dir = parent(&path);
            if !dir.is_dir() {
                return Err(invalid(format!(
                    "{flag} {shown}: the directory {} does not exist (create it first)",
                    dir.display()
                )));
            }
            check_dir_takes_a_file(flag, given, &path)?;
            Ok(Target::File(path))
        }
        Err(e) => Err(invalid(format!("{flag} {shown}: {e}"))),
    }
}

fn parent(path: &Path) -> &Path {
    path.parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
}

/// The atomic replace needs a new file in the target's directory: try making one now.
fn check_dir_takes_a_file(flag: &str, given: &Path, path: &Path) -> Result<(), PlanError> {
    let dir = parent(path);
    temp_in(dir, path).map(drop).map_err(|e| {
        invalid(format!(
            "{flag} {}: cannot create a file in {} ({e}): choose a directory you may write",
            given.display(),
            dir.display()
        ))
    })
}

/// A fresh, exclusively created temporary file beside `path`.
fn temp_in(dir: &Path, path: &Path) -> std::io::Result<tempfile::NamedTempFile> {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    tempfile::Builder::new()
        .prefix(&format!(".{name}."))
        .suffix(".sockbench-tmp")
        .rand_bytes(10)
        .tempfile_in(dir)
}

/// The identity of a target, to find two exports that would write the same file.
fn identity(t: &Target) -> Option<PathBuf> {
    let p = match t {
        Target::Stdout => return None,
        Target::File(p) | Target::InPlace(p) => p,
    };
    let dir = parent(p);
    let dir = dir.canonicalize().unwrap_or_else(|_| dir.to_path_buf());
    Some(match p.file_name() {
        Some(n) => dir.join(n),
        None => dir,
    })
}

/// Resolve and check every export before the run.
///
/// # Errors
/// A path that cannot be written, a directory, a missing directory, or two exports that
/// name the same file.
pub fn prepare(wanted: &[(ExportKind, PathBuf)]) -> Result<Vec<Export>, PlanError> {
    let mut out: Vec<Export> = Vec::new();
    for (kind, given) in wanted {
        let target = resolve(*kind, given)?;
        if let Some(id) = identity(&target) {
            if let Some(other) = out
                .iter()
                .find(|e| identity(&e.target).as_ref() == Some(&id))
            {
                return Err(invalid(format!(
                    "{} and {} both name {}: each would overwrite the other; give each its own file",
                    other.kind.flag(),
                    kind.flag(),
                    id.display()
                )));
            }
        }
        out.push(Export {
            kind: *kind,
            given: given.clone(),
            target,
        });
    }
    Ok(out)
}

/// Writes the exports: regular files after every scenario, everything at the end, and
/// remembers what could not be written.
pub struct ExportManager {
    exports: Vec<Export>,
    view: crate::vocab::View,
    failures: RefCell<Vec<(PathBuf, String)>>,
}

impl ExportManager {
    /// How the exports (and the document on stdout) draw their tables.
    pub fn view(&self) -> crate::vocab::View {
        self.view
    }

    /// Exports resolved by [`prepare`].
    pub fn new(exports: Vec<Export>, view: crate::vocab::View) -> ExportManager {
        ExportManager {
            exports,
            view,
            failures: RefCell::new(Vec::new()),
        }
    }

    /// After a scenario: rewrite every regular-file export (in-place and stdout ones
    /// wait for the end).
    pub fn after_scenario(&self, doc: &dyn Rendered) {
        self.write_files(doc, true);
    }

    /// At the end: the final state of every file export, and the in-place ones, once.
    pub fn finish(&self, doc: &dyn Rendered) {
        self.write_files(doc, false);
        for e in &self.exports {
            if let Target::InPlace(p) = &e.target {
                self.attempt(e, doc, false, |bytes| write_in_place(p, bytes));
            }
        }
    }

    fn write_files(&self, doc: &dyn Rendered, announce: bool) {
        for e in &self.exports {
            if let Target::File(p) = &e.target {
                self.attempt(e, doc, announce, |bytes| write_replacing(p, bytes));
            }
        }
    }

    /// Write one export; remember a failure (once per export), and during the run say so
    /// at once rather than at the end.
    fn attempt(
        &self,
        e: &Export,
        doc: &dyn Rendered,
        announce: bool,
        write: impl FnOnce(&[u8]) -> anyhow::Result<()>,
    ) {
        let result = render(e, doc, self.view).and_then(|b| write(&b));
        if let Err(err) = result {
            let mut failures = self.failures.borrow_mut();
            if failures.iter().all(|(p, _)| p != &e.given) {
                let msg = format!("{} {}: {err:#}", e.kind.flag(), e.given.display());
                if announce {
                    eprintln!(
                        "sockbench: warning: {msg}; the run goes on and the report is printed"
                    );
                }
                failures.push((e.given.clone(), msg));
            }
        }
    }

    /// Formats exported to stdout, in the order given.
    pub fn stdout_formats(&self) -> Vec<Format> {
        self.exports
            .iter()
            .filter(|e| e.target == Target::Stdout)
            .filter_map(|e| match e.kind {
                ExportKind::Report(f) => Some(f),
                ExportKind::Histogram => None,
            })
            .collect()
    }

    /// The exports that could not be written, one message each.
    pub fn failures(&self) -> Vec<String> {
        self.failures
            .borrow()
            .iter()
            .map(|(_, m)| m.clone())
            .collect()
    }
}

fn render(e: &Export, doc: &dyn Rendered, view: crate::vocab::View) -> anyhow::Result<Vec<u8>> {
    match e.kind {
        ExportKind::Report(f) => exporter(f, view).serialize(doc),
        ExportKind::Histogram => doc.histograms(e.given.extension().is_some_and(|x| x == "json")),
    }
}

/// This process's umask, read without changing it (`Umask:` in /proc/self/status).
fn umask() -> u32 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            let v = s
                .lines()
                .find_map(|l| l.strip_prefix("Umask:"))?
                .trim()
                .to_string();
            u32::from_str_radix(&v, 8).ok()
        })
        .unwrap_or(0o022)
}

/// Replace the regular file at `path` with `bytes` atomically, keeping its mode and owner.
///
/// # Errors
/// If the temporary file cannot be made, written or renamed.
pub fn write_replacing(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    let mut tmp = temp_in(parent(path), path).with_context(|| {
        format!(
            "cannot create a temporary file in {}",
            parent(path).display()
        )
    })?;
    let (mode, owner) = match std::fs::metadata(path) {
        Ok(m) => (m.mode() & 0o7777, Some((m.uid(), m.gid()))),
        Err(_) => (0o666 & !umask(), None),
    };
    tmp.as_file()
        .set_permissions(std::fs::Permissions::from_mode(mode))
        .context("cannot set the file mode")?;
    if let Some((uid, gid)) = owner {
        // Only a privileged process may give a file away; otherwise it stays ours.
        let _ = std::os::unix::fs::fchown(tmp.as_file(), Some(uid), Some(gid));
    }
    tmp.write_all(bytes).context("cannot write")?;
    tmp.persist(path)
        .map_err(|e| e.error)
        .with_context(|| format!("cannot rename the temporary file onto {}", path.display()))?;
    Ok(())
}

/// Write one whole document to where `e` goes: stdout, a regular file replaced atomically,
/// or in place (a FIFO's reader waited for at most a few seconds, never forever). For the
/// commands that write a document of their own once, at the end.
///
/// # Errors
/// As [`write_replacing`], or the target cannot be opened or written.
pub fn write_document(e: &Export, bytes: &[u8]) -> anyhow::Result<()> {
    match &e.target {
        Target::Stdout => {
            let mut out = std::io::stdout().lock();
            out.write_all(bytes)?;
            out.flush()?;
            Ok(())
        }
        Target::File(p) => write_replacing(p, bytes),
        Target::InPlace(p) => write_in_place(p, bytes),
    }
}

/// Write `bytes` into what `path` names (a FIFO, a device, a pipe), without creating or
/// replacing anything. A FIFO without a reader is waited for, briefly.
fn write_in_place(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    let open = || {
        OpenOptions::new()
            .write(true)
            // O_APPEND: a regular file behind /dev/stderr or /dev/fd/N gets the report
            // after what is already there, as `>>` would.
            .custom_flags(nix::libc::O_NONBLOCK | nix::libc::O_NOCTTY | nix::libc::O_APPEND)
            .open(path)
    };
    let fifo = std::fs::metadata(path).is_ok_and(|m| m.file_type().is_fifo());
    let since = Instant::now();
    // A Ctrl-C during the wait ends it (one before it, which ended the run, does not).
    let interrupted_before = crate::interrupt::requested();
    let mut first_wait = true;
    let mut file: File = loop {
        match open() {
            Ok(f) => break f,
            // ENXIO on a FIFO: no reader yet (elsewhere, e.g. /dev/tty without a
            // terminal, it is final).
            Err(e) if fifo && e.raw_os_error() == Some(nix::libc::ENXIO) => {
                if std::mem::take(&mut first_wait) {
                    crate::testhooks::hold("export-fifo");
                }
                if crate::interrupt::requested() && !interrupted_before {
                    anyhow::bail!("interrupted while waiting for the FIFO's reader");
                }
                if since.elapsed() > FIFO_READER_WAIT {
                    anyhow::bail!(
                        "nobody read the FIFO within {} s: start its reader first (e.g. `cat {} &`)",
                        FIFO_READER_WAIT.as_secs(),
                        path.display()
                    );
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(e) => return Err(e).context("cannot open it for writing"),
        }
    };
    // Back to blocking writes: a pipe reader may be slower than we are.
    nix::fcntl::fcntl(
        std::os::fd::AsRawFd::as_raw_fd(&file),
        nix::fcntl::FcntlArg::F_SETFL(nix::fcntl::OFlag::empty()),
    )
    .context("cannot make it blocking")?;
    file.write_all(bytes).context("cannot write")?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_chain_of_symlinks_leads_to_the_file_it_names() {
        let d = tempfile::tempdir().unwrap();
        let real = d.path().join("real.json");
        std::os::unix::fs::symlink("real.json", d.path().join("a")).unwrap();
        std::os::unix::fs::symlink(d.path().join("a"), d.path().join("b")).unwrap();
        assert_eq!(follow_links(&d.path().join("b")).unwrap(), real);
    }

    #[test]
    fn a_symlink_loop_is_an_error_not_a_hang() {
        let d = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink("y", d.path().join("x")).unwrap();
        std::os::unix::fs::symlink("x", d.path().join("y")).unwrap();
        assert!(follow_links(&d.path().join("x")).is_err());
    }

    #[test]
    fn a_new_file_gets_the_umask_mode_and_an_old_one_keeps_its_own() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("r.json");
        write_replacing(&p, b"1").unwrap();
        let mode = std::fs::metadata(&p).unwrap().mode() & 0o777;
        assert_eq!(mode, 0o666 & !umask());
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
        write_replacing(&p, b"2").unwrap();
        assert_eq!(std::fs::metadata(&p).unwrap().mode() & 0o777, 0o600);
        assert_eq!(std::fs::read(&p).unwrap(), b"2");
        let left: Vec<_> = std::fs::read_dir(d.path()).unwrap().collect();
        assert_eq!(left.len(), 1, "no temporary file is left behind");
    }
}
