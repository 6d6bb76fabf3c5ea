//! Quack's messages (protocol version 1, as DuckDB 1.5.5 sends them; see WIRE.md): a header object
//! (message type, connection id, client query id) followed by the body object. Requests are read
//! strictly; responses are written with every field a DuckDB client requires.

use crate::chunk::{Chunk, read_wrapper};
use crate::codec::{DecodeResult, Reader, Writer};

/// The message types of protocol version 1.
pub mod kind {
    pub const CONNECTION_REQUEST: u8 = 1;
    pub const CONNECTION_RESPONSE: u8 = 2;
    pub const PREPARE_REQUEST: u8 = 3;
    pub const PREPARE_RESPONSE: u8 = 4;
    pub const FETCH_REQUEST: u8 = 7;
    pub const FETCH_RESPONSE: u8 = 8;
    pub const APPEND_REQUEST: u8 = 9;
    pub const SUCCESS_RESPONSE: u8 = 10;
    pub const DISCONNECT_MESSAGE: u8 = 11;
    pub const ERROR_RESPONSE: u8 = 100;
}

/// The only protocol version there is.
pub const QUACK_VERSION: u64 = 1;

/// An absent `optional_idx`.
pub const NO_INDEX: u64 = u64::MAX;

/// What comes before every body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Header {
    pub kind: u8,
    /// The session, as the server named it in its connection response (empty before).
    pub connection_id: String,
    pub client_query_id: Option<u64>,
}

/// A request a client sends.
#[derive(Debug, Clone, PartialEq)]
pub enum Request {
    Connect {
        auth: String,
        client_version: String,
        platform: String,
        min_version: u64,
        max_version: u64,
    },
    /// Runs `sql` (Quack's prepare executes).
    Prepare {
        sql: String,
    },
    Fetch {
        result: i128,
    },
    /// Rows for `schema.table`.
    Append {
        schema: String,
        table: String,
        chunk: Option<Chunk>,
    },
    Disconnect,
}

impl Header {
    fn read(r: &mut Reader<'_>) -> DecodeResult<Self> {
        r.begin()?;
        r.expect(1)?;
        let kind = r.u8()?;
        let connection_id = if r.has(2)? {
            r.string()?
        } else {
            String::new()
        };
        let client_query_id = if r.has(3)? {
            Some(r.uleb()?).filter(|i| *i != NO_INDEX)
        } else {
            None
        };
        r.end()?;
        Ok(Self {
            kind,
            connection_id,
            client_query_id,
        })
    }

    fn write(&self, w: &mut Writer) {
        w.field(1).uleb(u64::from(self.kind));
        if !self.connection_id.is_empty() {
            w.field(2).string(&self.connection_id);
        }
        w.field(3).uleb(self.client_query_id.unwrap_or(NO_INDEX));
        w.end();
    }
}

/// Reads a request: its header and body, and nothing after them.
pub fn read_request(bytes: &[u8]) -> DecodeResult<(Header, Request)> {
    let mut r = Reader::new(bytes);
    let header = Header::read(&mut r)?;
    r.begin()?;
    let request = match header.kind {
        kind::CONNECTION_REQUEST => {
            let text = |r: &mut Reader<'_>, id| -> DecodeResult<String> {
                Ok(if r.has(id)? {
                    r.string()?
                } else {
                    String::new()
                })
            };
            let auth = text(&mut r, 1)?;
            let client_version = text(&mut r, 2)?;
            let platform = text(&mut r, 3)?;
            let min_version = if r.has(4)? { r.uleb()? } else { 0 };
            let max_version = if r.has(5)? { r.uleb()? } else { 0 };
            Request::Connect {
                auth,
                client_version,
                platform,
                min_version,
                max_version,
            }
        }
        kind::PREPARE_REQUEST => Request::Prepare {
            sql: if r.has(1)? {
                r.string()?
            } else {
                String::new()
            },
        },
        kind::FETCH_REQUEST => {
            r.expect(1)?;
            Request::Fetch {
                result: r.hugeint()?,
            }
        }
        kind::APPEND_REQUEST => {
            let schema = if r.has(1)? {
                r.string()?
            } else {
                String::new()
            };
            let table = if r.has(2)? {
                r.string()?
            } else {
                String::new()
            };
            let chunk = if r.has(3)? && r.bool()? {
                Some(read_wrapper(&mut r)?)
            } else {
                None
            };
            Request::Append {
                schema,
                table,
                chunk,
            }
        }
        kind::DISCONNECT_MESSAGE => Request::Disconnect,
        other => {
            return Err(r.error(format!(
                "message type {other} is not a request a server takes"
            )));
        }
    };
    r.end()?;
    if !r.is_done() {
        return Err(r.error(format!("{} bytes after the message", r.left())));
    }
    Ok((header, request))
}

/// A writer holding a response's header: its type, the session it names (only a connection
/// response names one) and no query id.
fn response(kind: u8, session: &str) -> Writer {
    let mut w = Writer::new();
    Header {
        kind,
        connection_id: session.to_string(),
        client_query_id: None,
    }
    .write(&mut w);
    w
}

/// A response with an empty body (`SUCCESS_RESPONSE`).
pub fn success() -> Vec<u8> {
    let mut w = response(kind::SUCCESS_RESPONSE, "");
    w.end();
    w.into_bytes()
}

/// `ERROR_RESPONSE`: what DuckDB shows its user as an Invalid Input Error.
pub fn error(message: &str) -> Vec<u8> {
    let mut w = response(kind::ERROR_RESPONSE, "");
    if !message.is_empty() {
        w.field(1).string(message);
    }
    w.end();
    w.into_bytes()
}

/// `CONNECTION_RESPONSE`, naming the new session in the header.
pub fn connected(session: &str, server_version: &str, platform: &str) -> Vec<u8> {
    let mut w = response(kind::CONNECTION_RESPONSE, session);
    w.field(1).string(server_version);
    w.field(2).string(platform);
    w.field(3).uleb(QUACK_VERSION);
    w.end();
    w.into_bytes()
}

/// Writes the list of result chunks (each a present DataChunkWrapper) as field `id`.
fn write_chunks(
    w: &mut Writer,
    id: u16,
    chunks: &[arrow::array::RecordBatch],
) -> Result<(), String> {
    w.field(id).uleb(chunks.len() as u64);
    for chunk in chunks {
        w.bool(true).field(300);
        crate::arrow_out::write_chunk(w, chunk)?;
        w.end();
    }
    Ok(())
}

/// `PREPARE_RESPONSE`: the result's types and names, its first chunks, whether more are to be
/// fetched, and the result's id.
pub fn prepared(
    schema: &arrow::datatypes::Schema,
    chunks: &[arrow::array::RecordBatch],
    more: bool,
    result: i128,
) -> Result<Vec<u8>, String> {
    let mut w = response(kind::PREPARE_RESPONSE, "");
    let types = schema
        .fields()
        .iter()
        .map(|f| crate::arrow_out::logical_type(f))
        .collect::<Result<Vec<_>, _>>()?;
    if !types.is_empty() {
        w.field(1).uleb(types.len() as u64);
        for t in &types {
            t.write(&mut w);
        }
        w.field(2).uleb(types.len() as u64);
        for f in schema.fields() {
            w.string(f.name());
        }
    }
    if more {
        w.field(3).bool(true);
    }
    if !chunks.is_empty() {
        write_chunks(&mut w, 4, chunks)?;
    }
    w.field(5).hugeint(result);
    w.end();
    Ok(w.into_bytes())
}

/// `FETCH_RESPONSE`: the next chunks and their batch's index; none and no index at the end.
pub fn fetched(
    chunks: &[arrow::array::RecordBatch],
    batch_index: Option<u64>,
) -> Result<Vec<u8>, String> {
    let mut w = response(kind::FETCH_RESPONSE, "");
    if !chunks.is_empty() {
        write_chunks(&mut w, 1, chunks)?;
    }
    w.field(2).uleb(batch_index.unwrap_or(NO_INDEX));
    w.end();
    Ok(w.into_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A request as DuckDB's client writes it.
    fn request(kind: u8, body: impl FnOnce(&mut Writer)) -> Vec<u8> {
        let mut w = Writer::new();
        Header {
            kind,
            connection_id: if kind == kind::CONNECTION_REQUEST {
                String::new()
            } else {
                "0123456789ABCDEF0123456789ABCDEF".into()
            },
            client_query_id: Some(7),
        }
        .write(&mut w);
        body(&mut w);
        w.end();
        w.into_bytes()
    }

    /// An append of one INTEGER column to `main.t`, as DuckDB sends it.
    fn append_request(values: &[Option<i32>]) -> Vec<u8> {
        request(kind::APPEND_REQUEST, |w| {
            w.field(1)
                .string("main")
                .field(2)
                .string("t")
                .field(3)
                .bool(true);
            w.field(300);
            crate::chunk::tests::write_int_chunk(w, values);
            w.end();
        })
    }

    #[test]
    fn requests_read_as_duckdb_writes_them() {
        let connect = request(kind::CONNECTION_REQUEST, |w| {
            w.field(1).string("token-1234");
            w.field(2).string("v1.5.5");
            w.field(3).string("linux_amd64");
        });
        let (header, body) = read_request(&connect).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(header.kind, kind::CONNECTION_REQUEST);
        assert_eq!(header.client_query_id, Some(7));
        assert_eq!(
            body,
            Request::Connect {
                auth: "token-1234".into(),
                client_version: "v1.5.5".into(),
                platform: "linux_amd64".into(),
                min_version: 0,
                max_version: 0,
            }
        );
        let prepare = request(kind::PREPARE_REQUEST, |w| {
            w.field(1).string("SELECT 1");
        });
        let (header, body) = read_request(&prepare).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(header.connection_id, "0123456789ABCDEF0123456789ABCDEF");
        assert_eq!(
            body,
            Request::Prepare {
                sql: "SELECT 1".into()
            }
        );
        let fetch = request(kind::FETCH_REQUEST, |w| {
            w.field(1).hugeint(-5);
        });
        assert_eq!(
            read_request(&fetch).map(|(_, b)| b),
            Ok(Request::Fetch { result: -5 })
        );
        let append = append_request(&[Some(1), None]);
        match read_request(&append) {
            Ok((
                _,
                Request::Append {
                    schema,
                    table,
                    chunk: Some(chunk),
                },
            )) => {
                assert_eq!(
                    (schema.as_str(), table.as_str(), chunk.rows),
                    ("main", "t", 2)
                );
            }
            other => panic!("{other:?}"),
        }
        let bye = request(kind::DISCONNECT_MESSAGE, |_| {});
        assert_eq!(read_request(&bye).map(|(_, b)| b), Ok(Request::Disconnect));
    }

    #[test]
    fn the_select_one_answer_header_is_duckdbs() {
        // The header of a response as DuckDB's own server writes it: type, then an absent query id.
        let mut w = Writer::new();
        Header {
            kind: kind::PREPARE_RESPONSE,
            connection_id: String::new(),
            client_query_id: None,
        }
        .write(&mut w);
        let mut want = vec![0x01, 0x00, 0x04, 0x03, 0x00];
        want.extend([0xff; 9]);
        want.extend([0x01, 0xff, 0xff]);
        assert_eq!(w.into_bytes(), want);
    }

    #[test]
    fn malformed_requests_are_errors_that_say_why() {
        let prepare = request(kind::PREPARE_REQUEST, |w| {
            w.field(1).string("SELECT 1");
        });
        let cases: Vec<(Vec<u8>, &str)> = vec![
            (Vec::new(), "the message ends inside an object"),
            (prepare[..prepare.len() - 3].to_vec(), "bytes announced"),
            (
                [prepare.clone(), vec![0]].concat(),
                "1 bytes after the message",
            ),
            (
                request(kind::PREPARE_RESPONSE, |_| {}),
                "message type 4 is not a request a server takes",
            ),
            (
                request(kind::PREPARE_REQUEST, |w| {
                    w.field(9).string("x");
                }),
                "unexpected field 9 where the object ends",
            ),
            (
                request(kind::FETCH_REQUEST, |_| {}),
                "field 1 expected, found 65535",
            ),
        ];
        for (bytes, why) in cases {
            let e = read_request(&bytes)
                .err()
                .map(|e| e.message)
                .unwrap_or_default();
            assert!(e.contains(why), "{why}: {e}");
        }
    }

    #[test]
    fn random_bytes_never_panic() {
        // A fixed-seed xorshift: every run reads the same million hostile messages, mutated from
        // valid ones and made up whole.
        let mut state: u64 = 0x9E37_79B9_7F4A_7C15;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let valid = [
            request(kind::CONNECTION_REQUEST, |w| {
                w.field(1).string("token-1234");
            }),
            request(kind::PREPARE_REQUEST, |w| {
                w.field(1).string("SELECT 1");
            }),
            request(kind::FETCH_REQUEST, |w| {
                w.field(1).hugeint(1 << 90);
            }),
            append_request(&[Some(1), None, Some(3)]),
        ];
        for round in 0..200_000u64 {
            let mut bytes = valid[(round % valid.len() as u64) as usize].clone();
            match next() % 4 {
                0 => {
                    let i = (next() as usize) % bytes.len();
                    bytes[i] = next() as u8;
                }
                1 => bytes.truncate((next() as usize) % bytes.len()),
                2 => {
                    let i = (next() as usize) % bytes.len();
                    bytes.insert(i, next() as u8);
                }
                _ => {
                    bytes = (0..(next() % 64)).map(|_| next() as u8).collect();
                }
            }
            let _ = read_request(&bytes);
        }
    }
}
