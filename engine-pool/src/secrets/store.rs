//! Persistent secrets (`CREATE PERSISTENT SECRET`): a user's secrets kept across sessions and
//! restarts, in one file, each sealed with AES-256-GCM.
//!
//! The key is derived from a passphrase the operator gives (the shell: `SQE_SECRETS_KEY`; the
//! server: `[secrets] key_env`) with PBKDF2-HMAC-SHA256 over a random salt kept in the file. Each
//! secret is sealed on its own, with its owner, name and type as associated data: a sealed value
//! moved to another user's entry, or altered, does not open. The file holds no value in the clear
//! and is written whole (a new file renamed over the old one), readable by its owner only.
//!
//! Two processes writing the same file at once can lose one of the writes; the shell and a server
//! should not share one.

use std::collections::BTreeMap;
use std::io::Write;
use std::num::NonZeroU32;
use std::path::PathBuf;
use std::sync::Mutex;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use ring::aead::{AES_256_GCM, Aad, LessSafeKey, NONCE_LEN, Nonce, UnboundKey};
use ring::rand::{SecureRandom, SystemRandom};
use serde::{Deserialize, Serialize};
use sqe_sessions::{SqeError, SqeResult};

const FORMAT: u32 = 1;
const ITERATIONS: u32 = 100_000;
const SALT_LEN: usize = 16;
/// The shortest passphrase taken: the key is only as strong as it.
pub const MIN_PASSPHRASE: usize = 16;

#[derive(Serialize, Deserialize)]
struct StoredFile {
    format: u32,
    salt: String,
    secrets: Vec<Sealed>,
}

#[derive(Serialize, Deserialize, Clone)]
struct Sealed {
    owner: String,
    name: String,
    kind: String,
    nonce: String,
    sealed: String,
}

/// One secret as the store hands it out: its kind's name and its values.
pub struct Opened {
    pub name: String,
    pub kind: String,
    pub values: BTreeMap<String, String>,
}

pub struct SecretStore {
    path: PathBuf,
    passphrase: String,
    /// The key and the salt it was derived with, once derived.
    key: Mutex<Option<(Vec<u8>, LessSafeKey)>>,
    /// One writer at a time in this process.
    writing: Mutex<()>,
}

impl std::fmt::Debug for SecretStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SecretStore")
            .field("path", &self.path)
            .finish()
    }
}

fn failed(what: &str, e: impl std::fmt::Display) -> SqeError {
    SqeError::internal(format!("persistent secrets: {what}: {e}"))
}

fn aad(owner: &str, name: &str, kind: &str) -> Vec<u8> {
    [owner, name, kind].join("\0").into_bytes()
}

impl SecretStore {
    /// A store in the file at `path`, sealed with a key derived from `passphrase`.
    pub fn new(path: PathBuf, passphrase: String) -> SqeResult<Self> {
        if passphrase.chars().count() < MIN_PASSPHRASE {
            return Err(SqeError::invalid(format!(
                "the key for persistent secrets must be at least {MIN_PASSPHRASE} characters (a long random string)"
            )));
        }
        Ok(Self {
            path,
            passphrase,
            key: Mutex::new(None),
            writing: Mutex::new(()),
        })
    }

    fn read(&self) -> SqeResult<Option<StoredFile>> {
        match std::fs::read(&self.path) {
            Ok(bytes) => serde_json::from_slice(&bytes)
                .map(Some)
                .map_err(|e| failed(&format!("{} is not a secrets file", self.path.display()), e)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(failed(&format!("reading {}", self.path.display()), e)),
        }
    }

    /// The key for `salt`, derived once per process.
    fn with_key<T>(&self, salt: &[u8], f: impl FnOnce(&LessSafeKey) -> T) -> SqeResult<T> {
        let mut cached = self.key.lock().unwrap_or_else(|p| p.into_inner());
        if cached.as_ref().is_none_or(|(s, _)| s != salt) {
            let mut bytes = [0u8; 32];
            let iterations = NonZeroU32::new(ITERATIONS).ok_or_else(|| failed("key", "0"))?;
            ring::pbkdf2::derive(
                ring::pbkdf2::PBKDF2_HMAC_SHA256,
                iterations,
                salt,
                self.passphrase.as_bytes(),
                &mut bytes,
            );
            let key = UnboundKey::new(&AES_256_GCM, &bytes).map_err(|e| failed("key", e))?;
            *cached = Some((salt.to_vec(), LessSafeKey::new(key)));
        }
        match cached.as_ref() {
            Some((_, key)) => Ok(f(key)),
            None => Err(failed("key", "not derived")),
        }
    }

    fn open(&self, salt: &[u8], entry: &Sealed) -> SqeResult<BTreeMap<String, String>> {
        let broken = || {
            SqeError::invalid(format!(
                "persistent secret '{}' cannot be opened: the key is not the one it was sealed with, or {} was altered",
                entry.name,
                self.path.display()
            ))
        };
        let nonce: [u8; NONCE_LEN] = B64
            .decode(&entry.nonce)
            .ok()
            .and_then(|n| n.try_into().ok())
            .ok_or_else(broken)?;
        let mut data = B64.decode(&entry.sealed).map_err(|_| broken())?;
        let aad = aad(&entry.owner, &entry.name, &entry.kind);
        let plain = self.with_key(salt, |key| {
            key.open_in_place(
                Nonce::assume_unique_for_key(nonce),
                Aad::from(aad),
                &mut data,
            )
            .map(|p| p.to_vec())
            .ok()
        })?;
        let plain = plain.ok_or_else(broken)?;
        serde_json::from_slice(&plain).map_err(|_| broken())
    }

    /// `owner`'s secrets, opened, by name.
    pub fn of(&self, owner: &str) -> SqeResult<Vec<Opened>> {
        let Some(file) = self.read()? else {
            return Ok(Vec::new());
        };
        let salt = B64.decode(&file.salt).map_err(|e| failed("salt", e))?;
        let mut out = Vec::new();
        for entry in file.secrets.iter().filter(|s| s.owner == owner) {
            out.push(Opened {
                name: entry.name.clone(),
                kind: entry.kind.clone(),
                values: self.open(&salt, entry)?,
            });
        }
        out.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(out)
    }

    /// Whether `owner` has a secret `name`.
    pub fn has(&self, owner: &str, name: &str) -> SqeResult<bool> {
        Ok(self
            .read()?
            .is_some_and(|f| f.secrets.iter().any(|s| s.owner == owner && s.name == name)))
    }

    /// Keeps `owner`'s secret `name` (replacing one of that name).
    pub fn put(
        &self,
        owner: &str,
        name: &str,
        kind: &str,
        values: &BTreeMap<String, String>,
    ) -> SqeResult<()> {
        let _writing = self.writing.lock().unwrap_or_else(|p| p.into_inner());
        let rng = SystemRandom::new();
        let mut file = match self.read()? {
            Some(file) => file,
            None => {
                let mut salt = [0u8; SALT_LEN];
                rng.fill(&mut salt).map_err(|e| failed("salt", e))?;
                StoredFile {
                    format: FORMAT,
                    salt: B64.encode(salt),
                    secrets: Vec::new(),
                }
            }
        };
        let salt = B64.decode(&file.salt).map_err(|e| failed("salt", e))?;
        let mut nonce = [0u8; NONCE_LEN];
        rng.fill(&mut nonce).map_err(|e| failed("nonce", e))?;
        let mut data = serde_json::to_vec(values).map_err(|e| failed("values", e))?;
        let aad = aad(owner, name, kind);
        self.with_key(&salt, |key| {
            key.seal_in_place_append_tag(
                Nonce::assume_unique_for_key(nonce),
                Aad::from(aad),
                &mut data,
            )
        })?
        .map_err(|e| failed("sealing", e))?;
        file.secrets
            .retain(|s| !(s.owner == owner && s.name == name));
        file.secrets.push(Sealed {
            owner: owner.to_string(),
            name: name.to_string(),
            kind: kind.to_string(),
            nonce: B64.encode(nonce),
            sealed: B64.encode(&data),
        });
        self.write(&file)
    }

    /// Removes `owner`'s secret `name`; whether there was one.
    pub fn remove(&self, owner: &str, name: &str) -> SqeResult<bool> {
        let _writing = self.writing.lock().unwrap_or_else(|p| p.into_inner());
        let Some(mut file) = self.read()? else {
            return Ok(false);
        };
        let before = file.secrets.len();
        file.secrets
            .retain(|s| !(s.owner == owner && s.name == name));
        if file.secrets.len() == before {
            return Ok(false);
        }
        self.write(&file)?;
        Ok(true)
    }

    fn write(&self, file: &StoredFile) -> SqeResult<()> {
        let text = serde_json::to_vec_pretty(file).map_err(|e| failed("writing", e))?;
        if let Some(dir) = self.path.parent() {
            std::fs::create_dir_all(dir).map_err(|e| failed("creating its folder", e))?;
        }
        let fresh = self
            .path
            .with_extension(format!("tmp-{}", uuid::Uuid::new_v4().simple()));
        let written = (|| {
            let mut out = std::fs::OpenOptions::new();
            out.write(true).create_new(true);
            #[cfg(unix)]
            std::os::unix::fs::OpenOptionsExt::mode(&mut out, 0o600);
            let mut f = out.open(&fresh)?;
            f.write_all(&text)?;
            f.sync_all()?;
            std::fs::rename(&fresh, &self.path)
        })();
        if let Err(e) = written {
            let _ = std::fs::remove_file(&fresh);
            return Err(failed(&format!("writing {}", self.path.display()), e));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &str = "a long random passphrase for tests";

    fn values(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn secrets_are_sealed_per_owner_and_survive_a_new_store() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let path = dir.path().join("secrets.json");
        let store = SecretStore::new(path.clone(), KEY.into()).unwrap_or_else(|e| panic!("{e}"));
        let s3 = values(&[("key_id", "AKIAALICE"), ("secret", "alice-very-secret")]);
        store
            .put("alice", "lake", "s3", &s3)
            .unwrap_or_else(|e| panic!("{e}"));
        store
            .put("bob", "lake", "bearer", &values(&[("token", "bob-token")]))
            .unwrap_or_else(|e| panic!("{e}"));

        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{e}"));
        for clear in ["AKIAALICE", "alice-very-secret", "bob-token"] {
            assert!(!text.contains(clear), "{clear} is in the file");
        }
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path).map(|m| m.permissions().mode() & 0o777);
            assert_eq!(mode.ok(), Some(0o600));
        }

        let again = SecretStore::new(path.clone(), KEY.into()).unwrap_or_else(|e| panic!("{e}"));
        let alice = again.of("alice").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(alice.len(), 1);
        assert_eq!(
            (alice[0].name.as_str(), alice[0].kind.as_str()),
            ("lake", "s3")
        );
        assert_eq!(alice[0].values, s3);
        assert_eq!(again.of("carol").map(|v| v.len()).ok(), Some(0));

        // Another key opens nothing.
        let wrong = SecretStore::new(path.clone(), "another long passphrase!".into())
            .unwrap_or_else(|e| panic!("{e}"));
        let e = wrong.of("alice").err().map(|e| e.message().to_string());
        assert!(e.is_some_and(|m| m.contains("cannot be opened")));

        // alice's sealed value moved into bob's entry does not open as bob's.
        let mut file: serde_json::Value =
            serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}"));
        let alices = file["secrets"][0]["sealed"].clone();
        let nonce = file["secrets"][0]["nonce"].clone();
        file["secrets"][1]["sealed"] = alices;
        file["secrets"][1]["nonce"] = nonce;
        file["secrets"][1]["kind"] = "s3".into();
        std::fs::write(&path, file.to_string()).unwrap_or_else(|e| panic!("{e}"));
        assert!(again.of("bob").is_err());

        assert!(
            again
                .remove("alice", "lake")
                .unwrap_or_else(|e| panic!("{e}"))
        );
        assert!(
            !again
                .remove("alice", "lake")
                .unwrap_or_else(|e| panic!("{e}"))
        );
    }

    #[test]
    fn a_short_key_is_refused() {
        let e = SecretStore::new("x".into(), "short".into()).err();
        assert!(e.is_some_and(|e| e.message().contains("at least 16 characters")));
    }
}
