//! Trino's spooling protocol, with the segments inline. A client that sends
//! `X-Trino-Query-Data-Encoding` (trino-python 0.340 asks for `json+zstd,json+lz4,json` by
//! default) gets each page's rows as one segment in that encoding: the page's JSON rows, compressed
//! with zstd (one frame that names its size) or LZ4 (one raw block) once they are long enough to
//! gain from it, then base64. Pages of such a client are larger than plain ones (see
//! `page_limits`), so a large result takes far fewer requests and far fewer bytes. A client that
//! asks for none of these encodings gets the plain protocol.
//!
//! The segment's metadata says where its rows start in the result (`rowOffset`), how many there are
//! (`rowsCount`), its size as sent (`segmentSize`) and, only when compressed, its size before
//! (`uncompressedSize`): its presence is how a client knows to decompress.

use base64::Engine as _;
use serde_json::{Value, json};

use crate::types::JsonRows;

/// The encodings SQE answers in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Encoding {
    Json,
    JsonZstd,
    JsonLz4,
}

/// Rows shorter than this as JSON are sent uncompressed in any encoding.
const COMPRESS_FROM: usize = 4096;

/// zstd's level: its fastest, which still shrinks JSON rows several times.
const ZSTD_LEVEL: i32 = 1;

impl Encoding {
    /// The first encoding of the client's list (`X-Trino-Query-Data-Encoding`, comma-separated, in
    /// its order of preference) that SQE speaks, as Trino chooses.
    pub(crate) fn chosen(header: Option<&str>) -> Option<Self> {
        header?
            .split(',')
            .map(str::trim)
            .find_map(|name| match name {
                "json" => Some(Self::Json),
                "json+zstd" => Some(Self::JsonZstd),
                "json+lz4" => Some(Self::JsonLz4),
                _ => None,
            })
    }

    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::Json => "json",
            Self::JsonZstd => "json+zstd",
            Self::JsonLz4 => "json+lz4",
        }
    }

    /// The page's `data`: its rows as one inline segment, the first of them row `offset` of the
    /// result.
    pub(crate) fn data(self, rows: JsonRows, offset: u64) -> Value {
        let count = rows.len();
        let json = rows.into_array();
        let compressed = match self {
            _ if json.len() < COMPRESS_FROM => None,
            Self::Json => None,
            Self::JsonZstd => zstd::bulk::compress(&json, ZSTD_LEVEL).ok(),
            Self::JsonLz4 => Some(lz4_flex::block::compress(&json)),
        }
        // Sent as it is where compressing gains nothing.
        .filter(|c| c.len() < json.len());
        let mut metadata = json!({"rowOffset": offset, "rowsCount": count});
        let bytes = match compressed {
            Some(c) => {
                metadata["uncompressedSize"] = json!(json.len());
                c
            }
            None => json,
        };
        metadata["segmentSize"] = json!(bytes.len());
        json!({
            "encoding": self.name(),
            "segments": [{
                "type": "inline",
                "data": base64::engine::general_purpose::STANDARD.encode(&bytes),
                "metadata": metadata,
            }],
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rows(values: &[Value]) -> JsonRows {
        let mut rows = JsonRows::default();
        for value in values {
            rows.push_value(value);
        }
        rows
    }

    fn decoded(data: &Value) -> (Vec<u8>, &Value) {
        let segment = &data["segments"][0];
        assert_eq!(segment["type"], "inline");
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(segment["data"].as_str().expect("a segment decodes"))
            .expect("a segment decodes");
        assert_eq!(
            segment["metadata"]["segmentSize"].as_u64(),
            Some(bytes.len() as u64)
        );
        (bytes, &segment["metadata"])
    }

    #[test]
    fn the_first_encoding_spoken_is_chosen() {
        assert_eq!(
            Encoding::chosen(Some("json+zstd,json+lz4,json")),
            Some(Encoding::JsonZstd)
        );
        assert_eq!(
            Encoding::chosen(Some("arrow, json+lz4")),
            Some(Encoding::JsonLz4)
        );
        assert_eq!(Encoding::chosen(Some("arrow")), None);
        assert_eq!(Encoding::chosen(None), None);
    }

    #[test]
    fn short_rows_go_uncompressed_and_long_ones_compressed() {
        let data = Encoding::JsonZstd.data(rows(&[json!([1, "a"]), json!([2, "b"])]), 7);
        assert_eq!(data["encoding"], "json+zstd");
        let (bytes, metadata) = decoded(&data);
        assert_eq!(bytes, br#"[[1,"a"],[2,"b"]]"#);
        assert_eq!(metadata["rowOffset"], 7);
        assert_eq!(metadata["rowsCount"], 2);
        assert!(metadata.get("uncompressedSize").is_none());

        let many: Vec<Value> = (0..1000).map(|i| json!([i, "some text"])).collect();
        let plain = serde_json::to_vec(&many).expect("a segment decodes");
        for encoding in [Encoding::JsonZstd, Encoding::JsonLz4] {
            let data = encoding.data(rows(&many), 0);
            let (bytes, metadata) = decoded(&data);
            assert_eq!(
                metadata["uncompressedSize"].as_u64(),
                Some(plain.len() as u64)
            );
            let back = match encoding {
                Encoding::JsonZstd => {
                    zstd::bulk::decompress(&bytes, plain.len()).expect("a segment decodes")
                }
                _ => lz4_flex::block::decompress(&bytes, plain.len()).expect("a segment decodes"),
            };
            assert_eq!(back, plain);
            assert!(bytes.len() < plain.len() / 4, "{}", bytes.len());
        }
        let data = Encoding::Json.data(rows(&many), 0);
        let (bytes, metadata) = decoded(&data);
        assert_eq!(bytes, plain);
        assert!(metadata.get("uncompressedSize").is_none());
    }
}
