//! Trino's spooling protocol. A client that sends `X-Trino-Query-Data-Encoding` (trino-python
//! 0.340 asks for `json+zstd,json+lz4,json` by default) gets its rows in segments in that
//! encoding: JSON rows, compressed with zstd (one frame that names its size) or LZ4 (one raw block)
//! once they are long enough to gain from it. A client that asks for none of these encodings gets
//! the plain protocol.
//!
//! The query's task makes the segments ahead of the client (see `spool` in the crate root), so
//! encoding and compressing overlap with the client's own decoding. A page carries the segments
//! ready when it is asked for. A small segment rides in the page (`inline`, base64); a larger one
//! is kept by the gateway and the page names where to fetch it (`spooled`): a URI with a random
//! handle and a random key in a header, both handed only to the query's owner. Clients fetch them
//! without credentials, as they would from an object store; a request that does carry credentials
//! must be the owner's. The client's acknowledgement (`ackUri`) drops the segment, and so does a
//! cancel of its query; one never acknowledged is dropped when unfetched for an hour (or the
//! client timeout, if longer). One user's kept segments hold at most [`SPOOLED_BYTES_PER_USER`],
//! all users' [`SPOOLED_BYTES`]; past either (or the server's cap on their number) a segment
//! rides inline instead, so the caps never fail a query.
//!
//! A segment's metadata says where its rows start in the result (`rowOffset`), how many there are
//! (`rowsCount`), its size as sent (`segmentSize`) and, only when compressed, its size before
//! (`uncompressedSize`): its presence is how a client knows to decompress.

use axum::body::Bytes;
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

/// A segment of more bytes than this (as sent) is kept by the gateway, not inlined in its page.
pub(crate) const INLINE_AT_MOST: usize = 1 << 20;

/// The bytes one user's kept segments hold at most; past it segments ride inline.
pub(crate) const SPOOLED_BYTES_PER_USER: usize = 256 << 20;

/// The bytes all users' kept segments hold at most; past it segments ride inline.
pub(crate) const SPOOLED_BYTES: usize = 1 << 30;

/// Segments the gateway keeps at most, for all users.
pub(crate) const SPOOLED_SEGMENTS: usize = 10_000;

/// How long a kept segment waits for its client at least (or the client timeout, if longer): a
/// client reads a page's segments one after another, at the pace its user takes the rows.
pub(crate) const SEGMENT_KEPT_FOR: std::time::Duration = std::time::Duration::from_secs(3600);

/// The header that carries a kept segment's key.
pub(crate) const SEGMENT_KEY: &str = "x-sqe-segment-key";

/// Some rows of a result, encoded as sent.
pub(crate) struct Segment {
    /// The result's row this segment starts with.
    pub offset: u64,
    pub rows: u64,
    pub bytes: Bytes,
    /// The JSON's length before compression; None when not compressed.
    pub uncompressed: Option<usize>,
}

/// Where a kept segment is fetched and acknowledged, and the key its fetch presents.
pub(crate) struct Kept {
    pub uri: String,
    pub ack_uri: String,
    pub key: String,
}

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

    /// `rows`, the first of them row `offset` of the result, as one segment.
    pub(crate) fn segment(self, rows: JsonRows, offset: u64) -> Segment {
        let count = rows.len() as u64;
        let json = rows.into_array();
        let compressed = match self {
            _ if json.len() < COMPRESS_FROM => None,
            Self::Json => None,
            Self::JsonZstd => zstd::bulk::compress(&json, ZSTD_LEVEL).ok(),
            Self::JsonLz4 => Some(lz4_flex::block::compress(&json)),
        }
        // Sent as it is where compressing gains nothing.
        .filter(|c| c.len() < json.len());
        let uncompressed = compressed.as_ref().map(|_| json.len());
        let mut bytes = compressed.unwrap_or(json);
        // The buffers are made for the worst case: a kept segment holds its own length only.
        bytes.shrink_to_fit();
        Segment {
            offset,
            rows: count,
            bytes: Bytes::from(bytes),
            uncompressed,
        }
    }

    /// A page's `data`: its segments, each inline unless `keep` keeps it (and says where).
    pub(crate) fn data(
        self,
        segments: Vec<Segment>,
        mut keep: impl FnMut(&Segment) -> Option<Kept>,
    ) -> Value {
        let segments: Vec<Value> = segments
            .into_iter()
            .map(|segment| {
                let mut metadata = json!({
                    "rowOffset": segment.offset,
                    "rowsCount": segment.rows,
                    "segmentSize": segment.bytes.len(),
                });
                if let Some(n) = segment.uncompressed {
                    metadata["uncompressedSize"] = json!(n);
                }
                let kept = (segment.bytes.len() > INLINE_AT_MOST)
                    .then(|| keep(&segment))
                    .flatten();
                match kept {
                    Some(Kept { uri, ack_uri, key }) => json!({
                        "type": "spooled",
                        "uri": uri,
                        "ackUri": ack_uri,
                        "headers": {SEGMENT_KEY: [key]},
                        "metadata": metadata,
                    }),
                    None => json!({
                        "type": "inline",
                        "data": base64::engine::general_purpose::STANDARD.encode(&segment.bytes),
                        "metadata": metadata,
                    }),
                }
            })
            .collect();
        json!({"encoding": self.name(), "segments": segments})
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

    /// The page data of `rows` as one segment, never kept.
    fn page(encoding: Encoding, rows: JsonRows, offset: u64) -> Value {
        encoding.data(vec![encoding.segment(rows, offset)], |_| None)
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
        let data = page(
            Encoding::JsonZstd,
            rows(&[json!([1, "a"]), json!([2, "b"])]),
            7,
        );
        assert_eq!(data["encoding"], "json+zstd");
        let (bytes, metadata) = decoded(&data);
        assert_eq!(bytes, br#"[[1,"a"],[2,"b"]]"#);
        assert_eq!(metadata["rowOffset"], 7);
        assert_eq!(metadata["rowsCount"], 2);
        assert!(metadata.get("uncompressedSize").is_none());

        let many: Vec<Value> = (0..1000).map(|i| json!([i, "some text"])).collect();
        let plain = serde_json::to_vec(&many).expect("a segment decodes");
        for encoding in [Encoding::JsonZstd, Encoding::JsonLz4] {
            let data = page(encoding, rows(&many), 0);
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
        let data = page(Encoding::Json, rows(&many), 0);
        let (bytes, metadata) = decoded(&data);
        assert_eq!(bytes, plain);
        assert!(metadata.get("uncompressedSize").is_none());
    }

    #[test]
    fn large_segments_are_kept_where_the_gateway_can_and_inline_where_it_cannot() {
        // Text that hardly compresses: more than INLINE_AT_MOST bytes even as zstd.
        let mut state = 7u64;
        let noisy: Vec<Value> = (0..100_000)
            .map(|_| {
                state = state
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                json!([format!("{state:016x}{:016x}", state.rotate_left(29))])
            })
            .collect();
        let small = Encoding::JsonZstd.segment(rows(&noisy[..10]), 0);
        let large = Encoding::JsonZstd.segment(rows(&noisy), 10);
        assert!(large.bytes.len() > INLINE_AT_MOST, "{}", large.bytes.len());
        let (large_size, large_full) = (large.bytes.len(), large.uncompressed);
        let mut asked = Vec::new();
        let data = Encoding::JsonZstd.data(vec![small, large], |segment| {
            asked.push(segment.offset);
            Some(Kept {
                uri: "http://sqe/segment".into(),
                ack_uri: "http://sqe/ack".into(),
                key: "k".into(),
            })
        });
        // Only the large segment was offered to be kept.
        assert_eq!(asked, vec![10]);
        let segments = data["segments"].as_array().expect("segments");
        assert_eq!(segments[0]["type"], "inline");
        assert_eq!(segments[1]["type"], "spooled");
        assert_eq!(segments[1]["uri"], "http://sqe/segment");
        assert_eq!(segments[1]["ackUri"], "http://sqe/ack");
        assert_eq!(segments[1]["headers"][SEGMENT_KEY], json!(["k"]));
        assert!(segments[1].get("data").is_none());
        let metadata = &segments[1]["metadata"];
        assert_eq!(metadata["rowOffset"], 10);
        assert_eq!(metadata["rowsCount"], 100_000);
        assert_eq!(metadata["segmentSize"].as_u64(), Some(large_size as u64));
        assert_eq!(
            metadata["uncompressedSize"].as_u64(),
            large_full.map(|n| n as u64)
        );

        // Refused (the owner's cap is met): the same segment rides inline.
        let large = Encoding::JsonZstd.segment(rows(&noisy), 10);
        let data = Encoding::JsonZstd.data(vec![large], |_| None);
        assert_eq!(data["segments"][0]["type"], "inline");
        let (bytes, _) = decoded(&data);
        assert_eq!(bytes.len(), large_size);
    }
}
