//! File table functions: `read_parquet`, `read_csv`, `read_json` (newline-delimited), and a bare path
//! in FROM (`SELECT * FROM 'x.parquet'`), with globs, gzip/zstd, and DuckDB-style named options.

use std::path::Path;
use std::sync::Arc;

use datafusion::arrow::datatypes::{DataType, Field, Schema};
use datafusion::catalog::TableProvider;
use datafusion::datasource::file_format::file_compression_type::FileCompressionType;
use datafusion::datasource::file_format::options::JsonReadOptions;
use datafusion::functions::expr_fn::nullif;
use datafusion::logical_expr::{cast, ident, lit};
use datafusion::prelude::{CsvReadOptions, ParquetReadOptions, SessionContext};
use sqe_sessions::{SqeError, SqeResult};

use futures::TryStreamExt;

use crate::error::from_datafusion;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileFormat {
    Parquet,
    Csv,
    Json,
}

impl FileFormat {
    /// The reader behind a table function name.
    pub fn from_function(name: &str) -> Option<Self> {
        match name.to_ascii_lowercase().as_str() {
            "read_parquet" | "parquet_scan" => Some(Self::Parquet),
            "read_csv" | "read_csv_auto" => Some(Self::Csv),
            "read_json" | "read_ndjson" | "read_json_auto" => Some(Self::Json),
            _ => None,
        }
    }

    /// The reader for a path, chosen by its extension (ignoring a compression suffix).
    pub fn from_path(path: &str) -> Option<Self> {
        let lower = path.to_ascii_lowercase();
        let stem = lower.trim_end_matches(".gz").trim_end_matches(".zst");
        if stem.ends_with(".parquet") {
            Some(Self::Parquet)
        } else if stem.ends_with(".csv") || stem.ends_with(".tsv") {
            Some(Self::Csv)
        } else if stem.ends_with(".json") || stem.ends_with(".jsonl") || stem.ends_with(".ndjson") {
            Some(Self::Json)
        } else {
            None
        }
    }

    fn name(self) -> &'static str {
        match self {
            Self::Parquet => "read_parquet",
            Self::Csv => "read_csv",
            Self::Json => "read_json",
        }
    }
}

/// A literal option value as written in SQL.
#[derive(Debug, Clone, PartialEq)]
pub enum OptionValue {
    Str(String),
    Bool(bool),
    Number(String),
}

impl OptionValue {
    fn as_bool(&self, key: &str) -> SqeResult<bool> {
        match self {
            Self::Bool(b) => Ok(*b),
            Self::Str(s) | Self::Number(s) => match s.to_ascii_lowercase().as_str() {
                "true" | "1" => Ok(true),
                "false" | "0" => Ok(false),
                _ => Err(SqeError::invalid(format!(
                    "option '{key}' expects true or false, got '{s}'"
                ))),
            },
        }
    }

    fn as_byte(&self, key: &str) -> SqeResult<u8> {
        let s = self.as_str();
        let s = if s == "\\t" { "\t" } else { s };
        match s.as_bytes() {
            [b] => Ok(*b),
            _ => Err(SqeError::invalid(format!(
                "option '{key}' expects a single character, got '{s}'"
            ))),
        }
    }

    fn as_str(&self) -> &str {
        match self {
            Self::Str(s) | Self::Number(s) => s,
            Self::Bool(true) => "true",
            Self::Bool(false) => "false",
        }
    }
}

/// Named options of a file function, in the order written.
pub type FileOptions = Vec<(String, OptionValue)>;

fn has_glob(path: &str) -> bool {
    path.contains(['*', '?', '['])
}

fn compression_of(path: &str, explicit: Option<&str>) -> SqeResult<FileCompressionType> {
    let name = match explicit {
        Some(c) if !c.eq_ignore_ascii_case("auto") => c.to_ascii_lowercase(),
        _ => {
            let lower = path.to_ascii_lowercase();
            if lower.ends_with(".gz") {
                "gzip".into()
            } else if lower.ends_with(".zst") {
                "zstd".into()
            } else {
                "none".into()
            }
        }
    };
    Ok(match name.as_str() {
        "gzip" | "gz" => FileCompressionType::GZIP,
        "zstd" | "zst" => FileCompressionType::ZSTD,
        "bzip2" | "bz2" => FileCompressionType::BZIP2,
        "xz" => FileCompressionType::XZ,
        "none" | "uncompressed" => FileCompressionType::UNCOMPRESSED,
        other => return Err(SqeError::invalid(format!("unknown compression '{other}'"))),
    })
}

/// The extension filter for listing: a single file or a glob selects itself; a directory is
/// filtered by the format's usual extension.
fn extension_filter(path: &str, default: &'static str, compression: FileCompressionType) -> String {
    if has_glob(path) || Path::new(path).is_file() {
        return String::new();
    }
    let suffix = match compression {
        FileCompressionType::GZIP => ".gz",
        FileCompressionType::ZSTD => ".zst",
        FileCompressionType::BZIP2 => ".bz2",
        FileCompressionType::XZ => ".xz",
        _ => "",
    };
    format!("{default}{suffix}")
}

/// `paths` with each object store URL that holds a glob (`s3://bucket/dir/*.parquet`) replaced by
/// the URLs of the objects it matches, in key order; DataFusion expands globs in local paths only.
async fn expand_object_globs(ctx: &SessionContext, paths: Vec<String>) -> SqeResult<Vec<String>> {
    let mut out = Vec::with_capacity(paths.len());
    for path in paths {
        let remote = path.contains("://") && !path.starts_with("file://");
        if !remote || !has_glob(&path) {
            out.push(path);
            continue;
        }
        let url = url::Url::parse(&path)
            .map_err(|e| SqeError::invalid(format!("'{path}' is not a URL: {e}")))?;
        let root = format!("{}://{}/", url.scheme(), url.host_str().unwrap_or_default());
        let key = path.strip_prefix(&root).unwrap_or_default();
        let pattern =
            glob::Pattern::new(key).map_err(|e| SqeError::invalid(format!("'{path}': {e}")))?;
        // List under the part before the first glob character.
        let fixed = &key[..key.find(['*', '?', '[']).unwrap_or(key.len())];
        let prefix = &fixed[..fixed.rfind('/').map_or(0, |i| i + 1)];
        let store = ctx
            .runtime_env()
            .object_store(
                datafusion::execution::object_store::ObjectStoreUrl::parse(&root)
                    .map_err(from_datafusion)?,
            )
            .map_err(from_datafusion)?;
        let listed: Vec<object_store::ObjectMeta> = store
            .list(Some(&object_store::path::Path::from(
                prefix.trim_end_matches('/'),
            )))
            .try_collect()
            .await
            .map_err(|e| from_datafusion(e.into()))?;
        let mut matched: Vec<String> = listed
            .into_iter()
            .map(|o| o.location.to_string())
            .filter(|k| pattern.matches(k))
            .map(|k| format!("{root}{k}"))
            .collect();
        if matched.is_empty() {
            return Err(SqeError::not_found(format!("no file matches '{path}'")));
        }
        matched.sort();
        out.extend(matched);
    }
    Ok(out)
}

/// A provider over `paths` read as `format`, with `options` as named in the call.
pub async fn file_table(
    ctx: &SessionContext,
    format: FileFormat,
    paths: Vec<String>,
    options: FileOptions,
) -> SqeResult<Arc<dyn TableProvider>> {
    if paths.is_empty() {
        return Err(SqeError::invalid(format!(
            "{}() needs a path",
            format.name()
        )));
    }
    let paths = expand_object_globs(ctx, paths).await?;
    let first = paths[0].clone();
    for p in &paths {
        let local = p.strip_prefix("file://").unwrap_or(p);
        if !has_glob(local) && !local.contains("://") && !Path::new(local).exists() {
            return Err(SqeError::not_found(format!("file '{p}' does not exist")));
        }
    }
    let mut compression_opt = None;
    for (k, v) in &options {
        if k == "compression" {
            compression_opt = Some(v.as_str().to_string());
        }
    }
    let compression = compression_of(&first, compression_opt.as_deref())?;
    let df = match format {
        FileFormat::Parquet => {
            if let Some((k, _)) = options.iter().find(|(k, _)| k != "compression") {
                return Err(SqeError::invalid(format!(
                    "read_parquet has no option '{k}'"
                )));
            }
            let ext = extension_filter(&first, ".parquet", FileCompressionType::UNCOMPRESSED);
            let opts = ParquetReadOptions {
                file_extension: &ext,
                ..Default::default()
            };
            ctx.read_parquet(paths, opts).await
        }
        FileFormat::Csv => {
            let ext = extension_filter(&first, ".csv", compression);
            let mut opts = CsvReadOptions::new()
                .file_compression_type(compression)
                .file_extension(&ext);
            if first.to_ascii_lowercase().contains(".tsv") {
                opts = opts.delimiter(b'\t');
            }
            for (k, v) in &options {
                match k.as_str() {
                    "delim" | "delimiter" | "sep" | "separator" => {
                        opts = opts.delimiter(v.as_byte(k)?)
                    }
                    "header" => opts = opts.has_header(v.as_bool(k)?),
                    "quote" => opts = opts.quote(v.as_byte(k)?),
                    "escape" => opts = opts.escape(v.as_byte(k)?),
                    "comment" => opts = opts.comment(v.as_byte(k)?),
                    "nullstr" | "null" => opts.null_regex = Some(regex_literal(v.as_str())),
                    "sample_size" => {
                        opts.schema_infer_max_records = v.as_str().parse().map_err(|_| {
                            SqeError::invalid(format!(
                                "option '{k}' expects a number, got '{}'",
                                v.as_str()
                            ))
                        })?
                    }
                    "compression" | "auto_detect" => {}
                    other => {
                        return Err(SqeError::invalid(format!(
                            "read_csv has no option '{other}'"
                        )));
                    }
                }
            }
            match opts.null_regex.clone() {
                // DataFusion 53 honours `null_regex` only while inferring the schema, not while
                // reading: read every column as text, then turn the null string into NULL and cast
                // to the inferred type.
                Some(_) => {
                    let inferred = ctx
                        .read_csv(paths.clone(), opts.clone())
                        .await
                        .map_err(from_datafusion)?;
                    let inferred = inferred.schema().as_arrow().clone();
                    let text = Schema::new(
                        inferred
                            .fields()
                            .iter()
                            .map(|f| Field::new(f.name(), DataType::Utf8, true))
                            .collect::<Vec<_>>(),
                    );
                    let null_text = options
                        .iter()
                        .find(|(k, _)| k == "nullstr" || k == "null")
                        .map(|(_, v)| v.as_str().to_string())
                        .unwrap_or_default();
                    let raw = ctx
                        .read_csv(paths, opts.schema(&text))
                        .await
                        .map_err(from_datafusion)?;
                    let exprs: Vec<_> = inferred
                        .fields()
                        .iter()
                        .map(|f| {
                            cast(
                                nullif(ident(f.name()), lit(null_text.clone())),
                                f.data_type().clone(),
                            )
                            .alias(f.name())
                        })
                        .collect();
                    raw.select(exprs)
                }
                None => ctx.read_csv(paths, opts).await,
            }
        }
        FileFormat::Json => {
            let ext = extension_filter(&first, ".json", compression);
            let mut opts = JsonReadOptions::default()
                .file_compression_type(compression)
                .file_extension(&ext);
            for (k, v) in &options {
                match (k.as_str(), v.as_str()) {
                    ("format", "newline_delimited" | "ndjson" | "auto") | ("compression", _) => {}
                    ("format", "array") => opts.newline_delimited = false,
                    ("format", other) => {
                        return Err(SqeError::invalid(format!(
                            "read_json format must be 'newline_delimited' or 'array', got '{other}'"
                        )));
                    }
                    (other, _) => {
                        return Err(SqeError::invalid(format!(
                            "read_json has no option '{other}'"
                        )));
                    }
                }
            }
            ctx.read_json(paths, opts).await
        }
    }
    .map_err(from_datafusion)?;
    Ok(df.into_view())
}

/// A regex matching exactly `s`.
fn regex_literal(s: &str) -> String {
    let mut out = String::from("^");
    for c in s.chars() {
        if "\\.+*?()|[]{}^$".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('$');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn format_follows_the_extension_through_compression() {
        assert_eq!(FileFormat::from_path("a/b.csv.gz"), Some(FileFormat::Csv));
        assert_eq!(
            FileFormat::from_path("x.PARQUET"),
            Some(FileFormat::Parquet)
        );
        assert_eq!(FileFormat::from_path("x.jsonl.zst"), Some(FileFormat::Json));
        assert_eq!(FileFormat::from_path("x.txt"), None);
    }

    #[test]
    fn null_string_becomes_an_exact_regex() {
        assert_eq!(regex_literal("N/A"), "^N/A$");
        assert_eq!(regex_literal("\\N"), "^\\\\N$");
    }
}
