//! The files a user names for sockbench to read (a saved report, a key file, a hosts
//! file), read one way: never more than a bound, and never blocking on what is not a
//! regular file.
//!
//! A path must name a regular file (symbolic links are followed): a FIFO, a device, a
//! socket or a directory is refused before it is opened (opening a FIFO blocks until it
//! has a writer, and `/dev/zero` never ends), and the opened file is checked again
//! (`fstat`), in case the path changed in between. It is opened with `O_NONBLOCK`, cleared
//! once it is known to be a regular file. At most the bound plus one byte is read: a file
//! over the bound is refused by its size before any of it is read, and one that grows
//! past it while read is refused when it does. Standard input (`-` for `report` and
//! `compare`) is read through the same bound. Nothing here knows any other room.

use std::fs::{File, Metadata};
use std::io::Read;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::os::unix::io::AsRawFd;
use std::path::Path;

use anyhow::{bail, Context};

/// A bound on one kind of input file, and what to call it in messages.
#[derive(Clone, Copy, Debug)]
pub struct Bound {
    /// Most bytes read.
    pub max: u64,
    /// What the file should be, with its article: "a sockbench report".
    pub what: &'static str,
    /// What to give instead of a FIFO, a device or a directory.
    pub instead: &'static str,
    /// Said before the path in messages: "key file " (or nothing).
    pub noun: &'static str,
}

/// Saved reports and compare inputs: 256 MiB, far above any report sockbench writes.
pub const REPORT: Bound = Bound {
    max: 256 << 20,
    what: "a sockbench report",
    instead: "give a report's file, or `-` and the report on standard input",
    noun: "",
};

/// `--key-file`: 4 KiB.
pub const KEY: Bound = Bound {
    max: 4096,
    what: "a key file",
    instead: "give a key file (a regular file)",
    noun: "key file ",
};

/// mesh `--hosts-file`: 1 MiB (a thousand agents take a few dozen KiB).
pub const HOSTS: Bound = Bound {
    max: 1 << 20,
    what: "a hosts file",
    instead: "give a hosts file (a regular file)",
    noun: "",
};

/// The bound for people: "256 MiB", "4096 bytes".
fn size_text(max: u64) -> String {
    match max {
        m if m >= 1 << 20 && m % (1 << 20) == 0 => format!("{} MiB", m >> 20),
        m => format!("{m} bytes"),
    }
}

fn over(name: &str, bound: Bound) -> anyhow::Error {
    anyhow::anyhow!(
        "{name} is over {}: not {}",
        size_text(bound.max),
        bound.what
    )
}

/// What a file that is not a regular one is.
fn kind_of(meta: &Metadata) -> &'static str {
    let t = meta.file_type();
    if t.is_dir() {
        "a directory"
    } else if t.is_fifo() {
        "a FIFO"
    } else if t.is_char_device() {
        "a character device"
    } else if t.is_block_device() {
        "a block device"
    } else if t.is_socket() {
        "a socket"
    } else {
        "a special file"
    }
}

fn not_regular(path: &Path, meta: &Metadata, bound: Bound) -> anyhow::Error {
    anyhow::anyhow!(
        "{}{} is {}, not a regular file: {}",
        bound.noun,
        path.display(),
        kind_of(meta),
        bound.instead
    )
}

/// Open `path` for reading if it names a regular file, without blocking on anything
/// else, and return it with its own metadata (`fstat`, for its mode and owner).
///
/// # Errors
/// The path cannot be opened or does not name a regular file; the message names what it
/// is and what to give instead.
pub fn open_regular(path: &Path, bound: Bound) -> anyhow::Result<(File, Metadata)> {
    let cannot = || format!("cannot read {}{}", bound.noun, path.display());
    let before = std::fs::metadata(path).with_context(cannot)?;
    if !before.is_file() {
        return Err(not_regular(path, &before, bound));
    }
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags((nix::fcntl::OFlag::O_NONBLOCK | nix::fcntl::OFlag::O_NOCTTY).bits())
        .open(path)
        .with_context(cannot)?;
    let meta = file.metadata().with_context(cannot)?;
    if !meta.is_file() {
        return Err(not_regular(path, &meta, bound));
    }
    nix::fcntl::fcntl(
        file.as_raw_fd(),
        nix::fcntl::FcntlArg::F_SETFL(nix::fcntl::OFlag::empty()),
    )
    .map_err(std::io::Error::from)
    .with_context(cannot)?;
    Ok((file, meta))
}

/// At most `bound.max` bytes from `r`; `name` says where they come from in messages.
///
/// # Errors
/// A read fails, or there are more than `bound.max` bytes.
pub fn read_bounded(r: impl Read, name: &str, bound: Bound) -> anyhow::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    r.take(bound.max.saturating_add(1))
        .read_to_end(&mut bytes)
        .with_context(|| format!("cannot read {name}"))?;
    if bytes.len() as u64 > bound.max {
        return Err(over(name, bound));
    }
    Ok(bytes)
}

/// The bytes of the regular file an opened `file` is (see [`open_regular`]).
///
/// # Errors
/// Over the bound (by its size, before anything is read, or while reading), or a read
/// fails.
pub fn read_opened(
    file: File,
    meta: &Metadata,
    path: &Path,
    bound: Bound,
) -> anyhow::Result<Vec<u8>> {
    let name = format!("{}{}", bound.noun, path.display());
    if meta.len() > bound.max {
        return Err(over(&name, bound));
    }
    read_bounded(file, &name, bound)
}

/// The bytes of the regular file `path` names, at most `bound.max` of them.
///
/// # Errors
/// See [`open_regular`] and [`read_opened`].
pub fn read_file(path: &Path, bound: Bound) -> anyhow::Result<Vec<u8>> {
    let (file, meta) = open_regular(path, bound)?;
    read_opened(file, &meta, path, bound)
}

/// The text of the regular file `path` names, at most `bound.max` bytes of UTF-8.
///
/// # Errors
/// See [`read_file`]; or it is not UTF-8.
pub fn read_text(path: &Path, bound: Bound) -> anyhow::Result<String> {
    String::from_utf8(read_file(path, bound)?).map_err(|_| {
        anyhow::anyhow!(
            "{}{} is not text (not UTF-8): not {}",
            bound.noun,
            path.display(),
            bound.what
        )
    })
}

/// At most `bound.max` bytes of standard input.
///
/// # Errors
/// See [`read_bounded`].
pub fn read_stdin(bound: Bound) -> anyhow::Result<Vec<u8>> {
    read_bounded(std::io::stdin().lock(), "standard input", bound)
}

/// Refuse a key or other secret (`name`: "key file PATH") that others can read, as ssh
/// refuses a private key: bits
/// for others are never allowed; bits for the group only when the file belongs to
/// another user (root, say, sharing it with this process's group, as Kubernetes mounts a
/// Secret with `fsGroup`); a file of this user must be 600 or 400.
///
/// # Errors
/// The file is open to others, or to its group while it is this user's own.
pub fn check_private(name: &str, path: &Path, meta: &Metadata) -> anyhow::Result<()> {
    use std::os::unix::fs::MetadataExt;
    let mode = meta.mode() & 0o777;
    let own = meta.uid() == nix::unistd::geteuid().as_raw();
    let Some(who) = open_to(mode, own) else {
        return Ok(());
    };
    bail!(
        "{name} is open to {who} (mode {mode:03o}): a key must be private; run `chmod 600 {}`",
        path.display()
    )
}

/// Who besides its owner may use a file of this `mode`, if that is not allowed; `own`:
/// the file is this user's.
fn open_to(mode: u32, own: bool) -> Option<&'static str> {
    if mode & 0o007 != 0 {
        Some("others")
    } else if own && mode & 0o070 != 0 {
        Some("its group")
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    const SMALL: Bound = Bound {
        max: 8,
        what: "a small file",
        instead: "give a small file",
        noun: "",
    };

    fn message<T: std::fmt::Debug>(r: anyhow::Result<T>) -> String {
        format!("{:#}", r.unwrap_err())
    }

    #[test]
    fn a_file_is_read_up_to_its_bound_and_refused_past_it() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f");
        std::fs::write(&p, b"12345678").unwrap();
        assert_eq!(read_file(&p, SMALL).unwrap(), b"12345678");
        std::fs::write(&p, b"123456789").unwrap();
        let e = message(read_file(&p, SMALL));
        assert!(e.ends_with("f is over 8 bytes: not a small file"), "{e}");
    }

    #[test]
    fn an_endless_stream_is_cut_at_its_bound_plus_one_byte() {
        let mut endless = std::io::repeat(b'x');
        let e = message(read_bounded(&mut endless, "zeros", SMALL));
        assert_eq!(e, "zeros is over 8 bytes: not a small file");
        assert_eq!(size_text(REPORT.max), "256 MiB");
        assert_eq!(size_text(HOSTS.max), "1 MiB");
        assert_eq!(size_text(KEY.max), "4096 bytes");
    }

    #[test]
    fn a_fifo_or_a_device_is_refused_without_blocking_or_reading() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        // No writer ever opens it: a plain open would block here for ever.
        let e = message(read_file(&fifo, KEY));
        assert!(
            e.contains("fifo is a FIFO, not a regular file: give a key file"),
            "{e}"
        );
        let e = message(read_file(Path::new("/dev/zero"), HOSTS));
        assert!(e.contains("/dev/zero is a character device"), "{e}");
        let e = message(read_file(dir.path(), HOSTS));
        assert!(e.contains("is a directory"), "{e}");
        let e = message(read_file(&dir.path().join("none"), HOSTS));
        assert!(e.starts_with("cannot read "), "{e}");
    }

    #[test]
    fn a_file_for_others_or_for_the_group_of_its_owner_is_not_private() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("k");
        std::fs::write(&p, b"k").unwrap();
        let with = |mode: u32| {
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).unwrap();
            let (_, meta) = open_regular(&p, KEY).unwrap();
            check_private("k", &p, &meta)
        };
        assert!(with(0o600).is_ok());
        assert!(with(0o400).is_ok());
        let e = message(with(0o644));
        assert!(e.contains("is open to others (mode 644)"), "{e}");
        assert!(
            e.ends_with(&format!("run `chmod 600 {}`", p.display())),
            "{e}"
        );
        let e = message(with(0o640));
        assert!(e.contains("is open to its group (mode 640)"), "{e}");
        assert!(message(with(0o602)).contains("open to others"));
        // Another user's file (a Kubernetes Secret: root's, mode 440, group fsGroup) may be
        // shared with the group; never with others.
        assert_eq!(open_to(0o440, false), None);
        assert_eq!(open_to(0o444, false), Some("others"));
        assert_eq!(open_to(0o440, true), Some("its group"));
    }
}
