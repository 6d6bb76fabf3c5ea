//! Which files a statement may read or write through the file functions (`read_parquet`,
//! `read_csv`, `read_json`, a bare path in FROM), `COPY … TO` and a table's `location`.
//!
//! Embedded, the shell's user owns the process and everything is allowed. A server runs as its own
//! user for everyone who can sign in, so there the policy is [`FileAccess::Restricted`]: local
//! paths only under the allowed directories, http(s) and object stores only when allowed, and a
//! catalog's warehouse never (its files belong to its tables). A path is
//! judged before anything looks at it, so a refused path and a missing one answer alike, and its
//! `..` and symbolic links are resolved before it is compared.

use std::path::{Component, Path, PathBuf};

use sqe_sessions::{ErrorCode, SqeError, SqeResult};

/// The policy, from the server's `[files]` section.
#[derive(Debug, Clone, Default)]
pub enum FileAccess {
    /// The embedded shell: the user's own process, the user's own files.
    #[default]
    Unrestricted,
    Restricted(FileRules),
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct FileRules {
    /// Any local path (the warehouses still excepted).
    pub allow_local_paths: bool,
    /// Local paths under these directories.
    pub allowed_local_prefixes: Vec<PathBuf>,
    /// `http://` and `https://` URLs.
    pub allow_http: bool,
    /// Object store URLs (`s3://bucket/prefix/`, `gs://…`) under these prefixes.
    pub allowed_object_prefixes: Vec<String>,
    /// Catalog URIs (`https://…`, `postgresql://…`) a session may `ATTACH`, under these prefixes.
    pub allowed_catalog_uris: Vec<String>,
}

/// What a statement does with a path, for the refusal's wording.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    Read,
    Write,
    /// A table's data and metadata go there (a table created without one gets its own place in
    /// the warehouse, which an explicit location may not name: dropping the table removes it).
    TableLocation,
}

impl Access {
    fn verb(self) -> &'static str {
        match self {
            Access::Read => "reading",
            Access::Write => "writing",
            Access::TableLocation => "a table location at",
        }
    }
}

fn refused(message: String) -> SqeError {
    SqeError::new(ErrorCode::PermissionDenied, message)
}

/// `..` and `.` resolved by their text, for a path that need not exist.
fn lexical(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for part in path.components() {
        match part {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

/// The path with every symbolic link in the part of it that exists resolved, and the rest
/// appended as written. The part before a glob character is all that is looked up.
fn resolved(path: &Path) -> PathBuf {
    let absolute = if path.is_absolute() {
        path.to_path_buf()
    } else {
        std::env::current_dir().unwrap_or_default().join(path)
    };
    let plain = lexical(&absolute);
    let mut existing = plain.as_path();
    let mut rest = Vec::new();
    loop {
        if let Ok(real) = existing.canonicalize() {
            let mut out = real;
            out.extend(rest.iter().rev());
            return out;
        }
        match (existing.parent(), existing.file_name()) {
            (Some(parent), Some(name)) => {
                rest.push(name.to_os_string());
                existing = parent;
            }
            _ => return plain,
        }
    }
}

/// The directory part of a path before its first glob character.
fn before_glob(path: &str) -> &str {
    match path.find(['*', '?', '[', '{']) {
        Some(i) => &path[..path[..i].rfind('/').map_or(0, |j| j + 1)],
        None => path,
    }
}

impl FileAccess {
    /// Whether a session may `ATTACH` the catalog at `uri`: on a server, only under
    /// `allowed_catalog_uris` (the server would otherwise reach any address a user names).
    pub fn check_catalog_uri(&self, uri: &str) -> SqeResult<()> {
        let FileAccess::Restricted(rules) = self else {
            return Ok(());
        };
        // A prefix ends at a path boundary: `http://host:80` does not allow `http://host:8080`.
        let under = |prefix: &str| {
            !prefix.is_empty()
                && uri.strip_prefix(prefix).is_some_and(|rest| {
                    prefix.ends_with('/') || rest.is_empty() || rest.starts_with(['/', '?'])
                })
        };
        if rules.allowed_catalog_uris.iter().any(|p| under(p)) {
            return Ok(());
        }
        Err(refused(format!(
            "attaching the catalog at '{uri}' is not allowed on this server (add its prefix to [files] allowed_catalog_uris)"
        )))
    }

    /// Whether `path` (a local path, `file://`, `http(s)://` or an object-store URL) may be used
    /// for `access`; `warehouses` are the catalogs' own directories. The error says which
    /// setting would allow it.
    pub fn check(&self, path: &str, access: Access, warehouses: &[PathBuf]) -> SqeResult<()> {
        let FileAccess::Restricted(rules) = self else {
            return Ok(());
        };
        let verb = access.verb();
        let lower = path.to_ascii_lowercase();
        if lower.starts_with("http://") || lower.starts_with("https://") {
            return if rules.allow_http && access == Access::Read {
                Ok(())
            } else {
                Err(refused(format!(
                    "{verb} '{path}' is not allowed on this server: URLs are off (set [files] allow_http = true to read them)"
                )))
            };
        }
        if let Some((scheme, _)) = path.split_once("://")
            && !scheme.eq_ignore_ascii_case("file")
        {
            return if rules
                .allowed_object_prefixes
                .iter()
                .any(|p| path.starts_with(p.as_str()))
            {
                Ok(())
            } else {
                Err(refused(format!(
                    "{verb} '{path}' is not allowed on this server (add its prefix to [files] allowed_object_prefixes)"
                )))
            };
        }
        let local = path.strip_prefix("file://").unwrap_or(path);
        let target = resolved(Path::new(before_glob(local)));
        let inside = |dir: &Path| target.starts_with(resolved(dir));
        if warehouses.iter().any(|w| inside(w)) {
            return Err(refused(format!(
                "{verb} '{path}' is not allowed: it is inside a catalog's warehouse, whose files belong to its tables"
            )));
        }
        let allowed =
            rules.allow_local_paths || rules.allowed_local_prefixes.iter().any(|p| inside(p));
        if allowed {
            Ok(())
        } else {
            Err(refused(format!(
                "{verb} local path '{path}' is not allowed on this server (add a directory that holds it to [files] allowed_local_prefixes, or set [files] allow_local_paths = true)"
            )))
        }
    }
}

/// The policy as the engine applies it: the rules, and the local warehouses of the server's own
/// catalogs, which no path may reach into.
#[derive(Debug, Clone)]
pub(crate) struct FilePolicy {
    access: FileAccess,
    warehouses: Vec<PathBuf>,
}

impl FilePolicy {
    pub fn new(access: FileAccess, warehouses: Vec<PathBuf>) -> Self {
        Self { access, warehouses }
    }

    /// Refuses a path the policy does not allow for `access`.
    pub fn check(&self, path: &str, access: Access) -> SqeResult<()> {
        if matches!(self.access, FileAccess::Unrestricted) {
            return Ok(());
        }
        self.access.check(path, access, &self.warehouses)
    }

    /// Refuses a catalog URI (`ATTACH`) the policy does not allow.
    pub fn check_catalog_uri(&self, uri: &str) -> SqeResult<()> {
        self.access.check_catalog_uri(uri)
    }

    /// Where the tables of a catalog a session attaches may keep their files: its own warehouse
    /// (`own`), and what the session's file functions could read anyway.
    pub fn confinement(&self, own: Option<&Path>) -> Confinement {
        Confinement::new(&self.access, own, &[], false, &self.warehouses)
    }
}

/// Where one catalog's tables may keep their files, on a server.
///
/// A catalog names the files of its tables: a REST server or another engine writes the metadata
/// that says where a table's manifests and data files are, and where dropping it with PURGE deletes.
/// A catalog that could name any path would let its tables read (and delete) the server's own
/// files, another catalog's tables among them. So every file a catalog's table touches must be in
/// the catalog's own warehouse, at a location the operator declared for that catalog, or where
/// the file functions may read anyway ([`FileRules`]), and never inside another catalog's warehouse.
/// Embedded, the process is the user's and nothing is confined.
#[derive(Debug, Clone, Default)]
pub struct Confinement {
    /// `None`: the embedded shell, no confinement.
    rules: Option<FileRules>,
    /// The catalog's own warehouse directory.
    own: Option<PathBuf>,
    /// Locations the operator declared for this catalog (`s3://bucket/prefix/`, `/srv/lake`).
    declared: Vec<String>,
    /// Any object store URL (a catalog the operator mounted, with no `locations` declared).
    any_object_store: bool,
    /// The warehouses of the server's other catalogs.
    others: Vec<PathBuf>,
}

impl Confinement {
    /// The confinement of a catalog on a server with `access`. `own` is the catalog's warehouse,
    /// `declared` the locations the operator gave it, `others` every catalog warehouse of the
    /// server (the catalog's own is left out of it here). `any_object_store` lets the catalog's
    /// tables live in any bucket when nothing is declared.
    pub fn new(
        access: &FileAccess,
        own: Option<&Path>,
        declared: &[String],
        any_object_store: bool,
        others: &[PathBuf],
    ) -> Self {
        let FileAccess::Restricted(rules) = access else {
            return Self::default();
        };
        let own = own.map(resolved);
        Self {
            rules: Some(rules.clone()),
            others: others
                .iter()
                .map(|w| resolved(w))
                .filter(|w| Some(w) != own.as_ref())
                .collect(),
            own,
            declared: declared.to_vec(),
            any_object_store: any_object_store && declared.is_empty(),
        }
    }

    /// Whether a table of the catalog may touch the file or directory at `location`; the reason
    /// if not.
    pub fn check(&self, location: &str) -> Result<(), String> {
        let Some(rules) = &self.rules else {
            return Ok(());
        };
        let outside = || {
            format!(
                "the catalog names the file '{location}', which is outside the places its tables may keep files on this server"
            )
        };
        if let Some((scheme, _)) = location.split_once("://")
            && !scheme.eq_ignore_ascii_case("file")
        {
            let object = scheme != "http" && scheme != "https";
            let declared = self.declared.iter().any(|d| under_url(location, d));
            let allowed = rules
                .allowed_object_prefixes
                .iter()
                .any(|p| under_url(location, p));
            return if declared || (object && (self.any_object_store || allowed)) {
                Ok(())
            } else {
                Err(outside())
            };
        }
        // As iceberg's local file IO reads it: `file:///p`, `file:/p` and `/p` are all `/p`.
        let local = location
            .strip_prefix("file://")
            .or_else(|| location.strip_prefix("file:"))
            .unwrap_or(location);
        if !local.starts_with('/') {
            return Err(outside());
        }
        let target = resolved(Path::new(local));
        let inside = |dir: &Path| target.starts_with(dir);
        if self.own.as_deref().is_some_and(inside) {
            return Ok(());
        }
        let declared = self.declared.iter().any(|d| {
            let d = d
                .strip_prefix("file://")
                .or_else(|| d.strip_prefix("file:"))
                .unwrap_or(d);
            d.starts_with('/') && inside(&resolved(Path::new(d)))
        });
        if declared {
            return Ok(());
        }
        if self.others.iter().any(|w| inside(w)) {
            return Err(format!(
                "the catalog names the file '{location}', which is inside another catalog's warehouse"
            ));
        }
        if rules.allow_local_paths
            || rules
                .allowed_local_prefixes
                .iter()
                .any(|p| inside(&resolved(p)))
        {
            Ok(())
        } else {
            Err(outside())
        }
    }
}

/// Whether `url` is under `prefix`, the prefix ending at a path boundary.
fn under_url(url: &str, prefix: &str) -> bool {
    !prefix.is_empty()
        && url
            .strip_prefix(prefix)
            .is_some_and(|rest| prefix.ends_with('/') || rest.is_empty() || rest.starts_with('/'))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules(prefixes: &[&Path]) -> FileAccess {
        FileAccess::Restricted(FileRules {
            allowed_local_prefixes: prefixes.iter().map(|p| p.to_path_buf()).collect(),
            ..FileRules::default()
        })
    }

    #[test]
    fn local_paths_need_an_allowed_prefix_and_cannot_climb_out() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let data = dir.path().join("data");
        let warehouse = dir.path().join("warehouse");
        std::fs::create_dir_all(&data).unwrap_or_else(|e| panic!("{e}"));
        std::fs::create_dir_all(&warehouse).unwrap_or_else(|e| panic!("{e}"));
        let policy = rules(&[&data]);
        let wh = [warehouse.clone()];
        let read = |p: &str| policy.check(p, Access::Read, &wh);
        let d = data.display();
        assert!(read(&format!("{d}/x.csv")).is_ok());
        assert!(read(&format!("file://{d}/sub/*.parquet")).is_ok());
        let err = read("/etc/passwd").err().map(|e| e.message().to_string());
        assert_eq!(
            err.as_deref(),
            Some(
                "reading local path '/etc/passwd' is not allowed on this server (add a directory that holds it to [files] allowed_local_prefixes, or set [files] allow_local_paths = true)"
            )
        );
        assert!(read(&format!("{d}/../warehouse/t/x.parquet")).is_err());
        assert!(read(&format!("{d}/../../../../etc/passwd")).is_err());
        std::os::unix::fs::symlink("/etc", data.join("etc")).unwrap_or_else(|e| panic!("{e}"));
        assert!(
            read(&format!("{d}/etc/passwd")).is_err(),
            "a link out is refused"
        );
        assert!(read("https://example.com/x.csv").is_err());
        assert!(read("s3://bucket/x.parquet").is_err());
    }

    #[test]
    fn warehouses_are_never_files_nor_explicit_locations() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let wh = [dir.path().to_path_buf()];
        let open = FileAccess::Restricted(FileRules {
            allow_local_paths: true,
            ..FileRules::default()
        });
        let inside = format!("{}/s/t/data/x.parquet", dir.path().display());
        let e = open.check(&inside, Access::Read, &wh).err();
        assert_eq!(e.map(|e| e.code()), Some(ErrorCode::PermissionDenied));
        assert!(open.check(&inside, Access::Write, &wh).is_err());
        let location = format!("{}/s/t", dir.path().display());
        assert!(open.check(&location, Access::TableLocation, &wh).is_err());
        assert!(
            rules(&[])
                .check("/srv/t", Access::TableLocation, &wh)
                .is_err()
        );
        assert!(open.check("/srv/t", Access::TableLocation, &wh).is_ok());
        assert!(
            FileAccess::Unrestricted
                .check(&inside, Access::Read, &wh)
                .is_ok()
        );
    }
    #[test]
    fn a_catalogs_tables_stay_in_its_places() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let mk = |p: &str| {
            let d = dir.path().join(p);
            std::fs::create_dir_all(&d).unwrap_or_else(|e| panic!("{e}"));
            d
        };
        let (own, other, shared, lake) = (mk("own"), mk("other"), mk("shared"), mk("lake"));
        let server = FileAccess::Restricted(FileRules {
            allowed_local_prefixes: vec![shared.clone()],
            allowed_object_prefixes: vec!["s3://open/".to_string()],
            ..FileRules::default()
        });
        let warehouses = [own.clone(), other.clone()];
        let at = |d: &Path, rest: &str| format!("{}/{rest}", d.display());

        // A local catalog: its own warehouse and what the file functions may read.
        let local = Confinement::new(&server, Some(&own), &[], false, &warehouses);
        assert_eq!(local.check(&at(&own, "t/data/a.parquet")), Ok(()));
        assert_eq!(
            local.check(&format!("file://{}", at(&own, "t/m.avro"))),
            Ok(())
        );
        assert_eq!(local.check(&at(&shared, "t/a.parquet")), Ok(()));
        let stolen = at(&other, "t/data/a.parquet");
        assert_eq!(
            local.check(&stolen),
            Err(format!(
                "the catalog names the file '{stolen}', which is inside another catalog's warehouse"
            ))
        );
        assert!(local.check(&at(&own, "../other/t/a.parquet")).is_err());
        assert!(local.check("/etc/passwd").is_err());
        assert!(local.check("file:/etc/passwd").is_err());
        assert!(local.check("relative/a.parquet").is_err());
        assert!(local.check("file://etc/passwd").is_err());
        assert!(local.check("s3://closed/a.parquet").is_err());
        assert_eq!(local.check("s3://open/a.parquet"), Ok(()));
        std::os::unix::fs::symlink(&other, own.join("link")).unwrap_or_else(|e| panic!("{e}"));
        assert!(
            local.check(&at(&own, "link/t/a.parquet")).is_err(),
            "a link out is refused"
        );

        // A mounted REST catalog without declared locations: any bucket, no local path.
        let rest = Confinement::new(&server, None, &[], true, &warehouses);
        assert_eq!(rest.check("s3://anywhere/t/a.parquet"), Ok(()));
        assert!(rest.check(&at(&lake, "t/a.parquet")).is_err());
        assert!(rest.check("http://169.254.169.254/latest").is_err());

        // With declared locations: those, and what anyone may read.
        let declared = [
            format!("file://{}", lake.display()),
            "s3://bucket/warehouse".to_string(),
        ];
        let rest = Confinement::new(&server, None, &declared, true, &warehouses);
        assert_eq!(rest.check(&at(&lake, "t/a.parquet")), Ok(()));
        assert_eq!(rest.check("s3://bucket/warehouse/t/a.parquet"), Ok(()));
        assert!(rest.check("s3://bucket/warehouse2/a.parquet").is_err());
        assert!(rest.check("s3://anywhere/t/a.parquet").is_err());
        assert_eq!(rest.check("s3://open/t/a.parquet"), Ok(()));
        assert!(rest.check(&at(&own, "t/a.parquet")).is_err());

        // Embedded, nothing is confined.
        let embedded = Confinement::new(&FileAccess::Unrestricted, None, &[], false, &warehouses);
        assert_eq!(embedded.check(&stolen), Ok(()));
    }
}
