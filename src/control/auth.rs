//! Mutual authentication by a pre-shared key: each side sends a fresh random nonce; the
//! client proves it holds the key with HMAC-SHA256(key, "client" | client nonce | server
//! nonce), the server answers with HMAC-SHA256(key, "server" | server nonce | client
//! nonce). Each side checks the other's proof in constant time (`hmac`'s `verify_slice`).
//! Neither proof can be replayed: the other side's nonce is new every time.

use std::path::Path;

use anyhow::{bail, Context};
use hmac::{Hmac, Mac};
use sha2::Sha256;

/// Bytes of a nonce.
pub const NONCE_BYTES: usize = 32;
/// Fewest bytes a key file must hold (after trimming a final newline).
pub const MIN_KEY_BYTES: usize = 16;

/// A pre-shared key.
#[derive(Clone)]
pub struct Key(Vec<u8>);

impl std::fmt::Debug for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Key(..)")
    }
}

impl Key {
    /// A key from its bytes.
    ///
    /// # Errors
    /// Fewer than [`MIN_KEY_BYTES`].
    pub fn new(bytes: &[u8]) -> anyhow::Result<Key> {
        if bytes.len() < MIN_KEY_BYTES {
            bail!(
                "the key is {} bytes; use at least {MIN_KEY_BYTES} (for example `(umask 077; head -c 32 /dev/urandom | base64 > sockbench.key)`)",
                bytes.len()
            );
        }
        Ok(Key(bytes.to_vec()))
    }

    /// The key in `path` (one final newline is not part of it), read through
    /// [`crate::input`]: a regular file of at most 4 KiB, private to its owner
    /// ([`crate::input::check_private`]: `chmod 600`).
    ///
    /// # Errors
    /// The file cannot be read, is not a regular file, is open to others, is empty or
    /// too short, or is over 4 KiB.
    pub fn load(path: &Path) -> anyhow::Result<Key> {
        let (file, meta) = crate::input::open_regular(path, crate::input::KEY)?;
        crate::input::check_private(&format!("key file {}", path.display()), path, &meta)?;
        let mut bytes = crate::input::read_opened(file, &meta, path, crate::input::KEY)?;
        if bytes.last() == Some(&b'\n') {
            bytes.pop();
            if bytes.last() == Some(&b'\r') {
                bytes.pop();
            }
        }
        Key::new(&bytes).with_context(|| format!("key file {}", path.display()))
    }

    fn mac(&self, label: &[u8], first: &[u8], second: &[u8]) -> Hmac<Sha256> {
        let mut m =
            <Hmac<Sha256> as Mac>::new_from_slice(&self.0).expect("HMAC takes any key length");
        m.update(label);
        m.update(first);
        m.update(second);
        m
    }

    /// The client's proof (hex).
    pub fn client_proof(&self, client_nonce: &[u8], server_nonce: &[u8]) -> String {
        hex::encode(
            self.mac(b"sockbench client", client_nonce, server_nonce)
                .finalize()
                .into_bytes(),
        )
    }

    /// The server's proof (hex).
    pub fn server_proof(&self, server_nonce: &[u8], client_nonce: &[u8]) -> String {
        hex::encode(
            self.mac(b"sockbench server", server_nonce, client_nonce)
                .finalize()
                .into_bytes(),
        )
    }

    /// Whether `proof` (hex) is the client's proof for these nonces; constant time.
    pub fn check_client(&self, proof: &str, client_nonce: &[u8], server_nonce: &[u8]) -> bool {
        let Ok(bytes) = hex::decode(proof) else {
            return false;
        };
        self.mac(b"sockbench client", client_nonce, server_nonce)
            .verify_slice(&bytes)
            .is_ok()
    }

    /// Whether `proof` (hex) is the server's proof for these nonces; constant time.
    pub fn check_server(&self, proof: &str, server_nonce: &[u8], client_nonce: &[u8]) -> bool {
        let Ok(bytes) = hex::decode(proof) else {
            return false;
        };
        self.mac(b"sockbench server", server_nonce, client_nonce)
            .verify_slice(&bytes)
            .is_ok()
    }
}

/// `n` random bytes from the kernel.
///
/// # Errors
/// The kernel's random source fails.
pub fn random(n: usize) -> anyhow::Result<Vec<u8>> {
    let mut b = vec![0u8; n];
    getrandom::getrandom(&mut b).map_err(|e| anyhow::anyhow!("cannot read random bytes: {e}"))?;
    Ok(b)
}

/// A nonce's bytes from its hex, if it is one.
pub fn nonce_bytes(hex_text: &str) -> Option<Vec<u8>> {
    hex::decode(hex_text)
        .ok()
        .filter(|b| b.len() == NONCE_BYTES)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn each_side_accepts_only_the_other_sides_proof_for_these_nonces() {
        let key = Key::new(b"0123456789abcdef-shared").unwrap();
        assert_eq!(format!("{key:?}"), "Key(..)", "a key never reaches a log");
        let other = Key::new(b"0123456789abcdef-other!").unwrap();
        let (c, s) = (random(NONCE_BYTES).unwrap(), random(NONCE_BYTES).unwrap());
        assert_ne!(c, s);
        let proof = key.client_proof(&c, &s);
        assert_eq!(proof.len(), 64);
        assert!(key.check_client(&proof, &c, &s));
        assert!(!other.check_client(&proof, &c, &s));
        // A client proof is not a server proof, nor a proof for other nonces.
        assert!(!key.check_server(&proof, &s, &c));
        assert!(!key.check_client(&proof, &s, &c));
        let s2 = random(NONCE_BYTES).unwrap();
        assert!(!key.check_client(&proof, &c, &s2));
        let answer = key.server_proof(&s, &c);
        assert!(key.check_server(&answer, &s, &c));
        assert!(!key.check_client(&answer, &c, &s));
        assert!(!key.check_client("zz", &c, &s));
        assert!(!key.check_client(&proof[..62], &c, &s));
    }

    #[test]
    fn a_key_file_is_read_without_its_newline_and_must_be_long_enough() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("k");
        let write = |text: &[u8]| {
            std::fs::write(&p, text).unwrap();
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
        };
        write(b"0123456789abcdef\n");
        let a = Key::load(&p).unwrap();
        write(b"0123456789abcdef");
        let b = Key::load(&p).unwrap();
        assert_eq!(a.0, b.0);
        write(b"short\n");
        let e = format!("{:#}", Key::load(&p).unwrap_err());
        assert!(e.contains("the key is 5 bytes"), "{e}");
        write(&[b'k'; 4096]);
        assert!(Key::load(&p).is_ok(), "exactly 4 KiB is allowed");
        write(&[b'k'; 5000]);
        let e = format!("{:#}", Key::load(&p).unwrap_err());
        assert!(e.ends_with("k is over 4096 bytes: not a key file"), "{e}");
        let e = format!("{:#}", Key::load(&dir.path().join("none")).unwrap_err());
        assert!(e.contains("cannot read key file"), "{e}");
    }

    #[test]
    fn a_key_file_that_never_ends_or_has_no_writer_is_refused_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        let e = format!("{:#}", Key::load(&fifo).unwrap_err());
        assert!(e.contains("is a FIFO, not a regular file"), "{e}");
        let e = format!("{:#}", Key::load(Path::new("/dev/zero")).unwrap_err());
        assert!(
            e.starts_with("key file /dev/zero is a character device"),
            "{e}"
        );
    }

    #[test]
    fn a_key_file_others_can_read_is_refused_with_the_chmod_that_fixes_it() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("k");
        std::fs::write(&p, "0123456789abcdef\n").unwrap();
        for mode in [0o644, 0o604, 0o660, 0o640] {
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).unwrap();
            let e = format!("{:#}", Key::load(&p).unwrap_err());
            assert!(e.contains(&format!("(mode {mode:03o})")), "{e}");
            assert!(
                e.ends_with(&format!("run `chmod 600 {}`", p.display())),
                "{e}"
            );
        }
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o400)).unwrap();
        assert!(
            Key::load(&p).is_ok(),
            "a read-only key of its owner is private"
        );
    }

    #[test]
    fn nonces_are_64_hex_digits() {
        assert_eq!(nonce_bytes(&"ab".repeat(32)).map(|b| b.len()), Some(32));
        assert_eq!(nonce_bytes("abab"), None);
        assert_eq!(nonce_bytes(&"zz".repeat(32)), None);
    }
}
