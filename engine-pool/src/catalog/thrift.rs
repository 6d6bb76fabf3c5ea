//! Just enough of Thrift's binary protocol to call a Hive Metastore: a call whose arguments are
//! strings and lists of strings, and a reply read into a generic value tree.
//!
//! Messages are strict (versioned headers), unframed, as HMS expects them. The reply comes from a
//! server SQE does not control, so reading it is bounded: no string or container may claim more
//! than the limits below, nesting is capped, and no allocation is sized by a count before the
//! elements have arrived.

use std::fmt;
use std::io::{self, Read};

const VERSION_1: u32 = 0x8001_0000;
const CALL: u8 = 1;
const REPLY: u8 = 2;
const EXCEPTION: u8 = 3;

const STOP: u8 = 0;
const BOOL: u8 = 2;
const BYTE: u8 = 3;
const DOUBLE: u8 = 4;
const I16: u8 = 6;
const I32: u8 = 8;
const I64: u8 = 10;
const STRING: u8 = 11;
const STRUCT: u8 = 12;
const MAP: u8 = 13;
const SET: u8 = 14;
const LIST: u8 = 15;

/// The longest string or binary a reply may hold.
const MAX_STRING: usize = 16 << 20;
/// The most elements one list, set or map of a reply may hold.
const MAX_ELEMENTS: usize = 1 << 20;
/// How deep structs and containers may nest.
const MAX_DEPTH: usize = 64;

/// One value of a reply. Sets read as lists.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Bool(bool),
    Byte(i8),
    I16(i16),
    I32(i32),
    I64(i64),
    Double(f64),
    Binary(Vec<u8>),
    Struct(Vec<(i16, Value)>),
    List(Vec<Value>),
    Map(Vec<(Value, Value)>),
}

impl Value {
    /// Field `id` of a struct.
    pub fn field(&self, id: i16) -> Option<&Value> {
        match self {
            Value::Struct(fields) => fields.iter().find(|(i, _)| *i == id).map(|(_, v)| v),
            _ => None,
        }
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::Binary(b) => std::str::from_utf8(b).ok(),
            _ => None,
        }
    }

    pub fn as_list(&self) -> Option<&[Value]> {
        match self {
            Value::List(items) => Some(items),
            _ => None,
        }
    }

    /// A `map<string, string>` as pairs; entries that are not strings are left out.
    pub fn string_pairs(&self) -> Vec<(&str, &str)> {
        match self {
            Value::Map(entries) => entries
                .iter()
                .filter_map(|(k, v)| Some((k.as_str()?, v.as_str()?)))
                .collect(),
            _ => Vec::new(),
        }
    }

    /// A `list<string>`; elements that are not strings are left out.
    pub fn strings(&self) -> Vec<String> {
        self.as_list()
            .unwrap_or_default()
            .iter()
            .filter_map(|v| v.as_str().map(str::to_string))
            .collect()
    }
}

/// What went wrong with a call.
#[derive(Debug)]
pub enum ThriftError {
    /// The connection failed or closed.
    Io(io::Error),
    /// The reply is not what the protocol allows.
    Protocol(String),
    /// The server could not run the call (`TApplicationException`: an unknown method, …).
    Application(String),
}

impl fmt::Display for ThriftError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ThriftError::Io(e) => write!(f, "{e}"),
            ThriftError::Protocol(m) => write!(f, "not a Thrift reply: {m}"),
            ThriftError::Application(m) => write!(f, "the call failed: {m}"),
        }
    }
}

impl From<io::Error> for ThriftError {
    fn from(e: io::Error) -> Self {
        ThriftError::Io(e)
    }
}

/// A call being written: `Call::new("get_table", seq).string(1, db).string(2, table).finish()`.
pub struct Call {
    bytes: Vec<u8>,
}

impl Call {
    pub fn new(method: &str, seq: i32) -> Self {
        let mut bytes = Vec::with_capacity(64 + method.len());
        bytes.extend_from_slice(&(VERSION_1 | u32::from(CALL)).to_be_bytes());
        put_string(&mut bytes, method.as_bytes());
        bytes.extend_from_slice(&seq.to_be_bytes());
        Self { bytes }
    }

    pub fn string(mut self, id: i16, value: &str) -> Self {
        self.field(STRING, id);
        put_string(&mut self.bytes, value.as_bytes());
        self
    }

    pub fn strings(mut self, id: i16, values: &[String]) -> Self {
        self.field(LIST, id);
        self.bytes.push(STRING);
        let n = i32::try_from(values.len()).unwrap_or(i32::MAX);
        self.bytes.extend_from_slice(&n.to_be_bytes());
        for v in values.iter().take(n as usize) {
            put_string(&mut self.bytes, v.as_bytes());
        }
        self
    }

    fn field(&mut self, kind: u8, id: i16) {
        self.bytes.push(kind);
        self.bytes.extend_from_slice(&id.to_be_bytes());
    }

    /// The message's bytes, its argument struct closed.
    pub fn finish(mut self) -> Vec<u8> {
        self.bytes.push(STOP);
        self.bytes
    }
}

fn put_string(out: &mut Vec<u8>, s: &[u8]) {
    let n = i32::try_from(s.len()).unwrap_or(i32::MAX);
    out.extend_from_slice(&n.to_be_bytes());
    out.extend_from_slice(&s[..n as usize]);
}

/// Reads the reply to the call `method` numbered `seq`: its result struct.
pub fn read_reply(r: &mut impl Read, method: &str, seq: i32) -> Result<Value, ThriftError> {
    let mut reader = Reader { r };
    let header = reader.u32()?;
    if header & 0xffff_0000 != VERSION_1 {
        return Err(ThriftError::Protocol(format!(
            "message header {header:#010x}"
        )));
    }
    let kind = (header & 0xff) as u8;
    let name = reader.string()?;
    let got = reader.i32()?;
    let body = reader.value(STRUCT, 0)?;
    if kind == EXCEPTION {
        let message = body.field(1).and_then(Value::as_str).unwrap_or("");
        return Err(ThriftError::Application(message.to_string()));
    }
    if kind != REPLY || name != method.as_bytes() || got != seq {
        return Err(ThriftError::Protocol(format!(
            "expected the reply to {method} #{seq}, got message type {kind} for '{}' #{got}",
            String::from_utf8_lossy(&name)
        )));
    }
    Ok(body)
}

struct Reader<'a, R: Read> {
    r: &'a mut R,
}

impl<R: Read> Reader<'_, R> {
    fn bytes<const N: usize>(&mut self) -> Result<[u8; N], ThriftError> {
        let mut b = [0u8; N];
        self.r.read_exact(&mut b)?;
        Ok(b)
    }

    fn u8(&mut self) -> Result<u8, ThriftError> {
        Ok(self.bytes::<1>()?[0])
    }

    fn u32(&mut self) -> Result<u32, ThriftError> {
        Ok(u32::from_be_bytes(self.bytes()?))
    }

    fn i32(&mut self) -> Result<i32, ThriftError> {
        Ok(i32::from_be_bytes(self.bytes()?))
    }

    /// A count or length, checked against `max` before anything is read or allocated for it.
    fn size(&mut self, max: usize, what: &str) -> Result<usize, ThriftError> {
        let n = self.i32()?;
        usize::try_from(n)
            .ok()
            .filter(|n| *n <= max)
            .ok_or_else(|| ThriftError::Protocol(format!("{what} of {n}")))
    }

    fn string(&mut self) -> Result<Vec<u8>, ThriftError> {
        let n = self.size(MAX_STRING, "a string length")?;
        let mut out = Vec::new();
        let read = self.r.by_ref().take(n as u64).read_to_end(&mut out)?;
        if read < n {
            return Err(ThriftError::Io(io::ErrorKind::UnexpectedEof.into()));
        }
        Ok(out)
    }

    fn value(&mut self, kind: u8, depth: usize) -> Result<Value, ThriftError> {
        if depth > MAX_DEPTH {
            return Err(ThriftError::Protocol("values nested too deep".into()));
        }
        Ok(match kind {
            BOOL => Value::Bool(self.u8()? != 0),
            BYTE => Value::Byte(i8::from_be_bytes(self.bytes()?)),
            I16 => Value::I16(i16::from_be_bytes(self.bytes()?)),
            I32 => Value::I32(self.i32()?),
            I64 => Value::I64(i64::from_be_bytes(self.bytes()?)),
            DOUBLE => Value::Double(f64::from_be_bytes(self.bytes()?)),
            STRING => Value::Binary(self.string()?),
            STRUCT => {
                let mut fields = Vec::new();
                loop {
                    let kind = self.u8()?;
                    if kind == STOP {
                        break;
                    }
                    let id = i16::from_be_bytes(self.bytes()?);
                    fields.push((id, self.value(kind, depth + 1)?));
                }
                Value::Struct(fields)
            }
            LIST | SET => {
                let element = self.u8()?;
                let n = self.size(MAX_ELEMENTS, "a list")?;
                let mut items = Vec::with_capacity(n.min(1024));
                for _ in 0..n {
                    items.push(self.value(element, depth + 1)?);
                }
                Value::List(items)
            }
            MAP => {
                let (k, v) = (self.u8()?, self.u8()?);
                let n = self.size(MAX_ELEMENTS, "a map")?;
                let mut entries = Vec::with_capacity(n.min(1024));
                for _ in 0..n {
                    entries.push((self.value(k, depth + 1)?, self.value(v, depth + 1)?));
                }
                Value::Map(entries)
            }
            other => return Err(ThriftError::Protocol(format!("value type {other}"))),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(s: &str) -> Vec<u8> {
        let s: String = s.split_whitespace().collect();
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap_or_else(|e| panic!("{e}")))
            .collect()
    }

    #[test]
    fn a_call_is_written_as_hms_reads_it() {
        // get_table("sales", "orders") as pyiceberg's Thrift client sends it to HMS 2.3.
        let call = Call::new("get_table", 0)
            .string(1, "sales")
            .string(2, "orders")
            .finish();
        assert_eq!(
            call,
            hex("80010001 00000009 6765745f7461626c65 00000000
                 0b0001 00000005 73616c6573 0b0002 00000006 6f7264657273 00")
        );
    }

    #[test]
    fn replies_and_refusals_as_hms_sends_them() {
        // HMS 2.3's answer to get_table("sales", "missing"): NoSuchObjectException in field 2.
        let reply = hex(
            "80010002000000096765745f7461626c65000000000c00020b00010000001d73616c65732e6d69\
             7373696e67207461626c65206e6f7420666f756e640000",
        );
        let body =
            read_reply(&mut reply.as_slice(), "get_table", 0).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(body.field(0), None);
        let message = body
            .field(2)
            .and_then(|e| e.field(1))
            .and_then(Value::as_str);
        assert_eq!(message, Some("sales.missing table not found"));
        // A reply to another call is not taken for this one's.
        let wrong = read_reply(&mut reply.as_slice(), "get_table", 7).err();
        assert!(matches!(wrong, Some(ThriftError::Protocol(_))), "{wrong:?}");

        let mut reply = Call::new("x", 0).finish();
        reply[3] = EXCEPTION;
        let reply: Vec<u8> = reply[..reply.len() - 1]
            .iter()
            .copied()
            .chain(hex("0b0001 00000003 626164 080002 00000001 00"))
            .collect();
        let e = read_reply(&mut reply.as_slice(), "x", 0).err();
        assert_eq!(
            e.map(|e| e.to_string()),
            Some("the call failed: bad".into())
        );
    }

    #[test]
    fn hostile_replies_fail_cleanly() {
        let header = |rest: &str| {
            let mut b = hex("80010002 00000001 78 00000000");
            b.extend(hex(rest));
            b
        };
        let cases = [
            // A string that claims 2 GB.
            header("0b0001 7fffffff 41"),
            // A list that claims a billion elements, then ends.
            header("0f0000 0b 3b9aca00"),
            // A negative length.
            header("0b0001 ffffffff"),
            // An unknown value type.
            header("11 0001 00"),
            // Cut off in the middle.
            header("0c0000 0b0001 00000010 6162"),
            // Not Thrift at all.
            b"HTTP/1.1 400 Bad Request\r\n\r\n".to_vec(),
            Vec::new(),
        ];
        for bytes in cases {
            let r = read_reply(&mut bytes.as_slice(), "x", 0);
            assert!(r.is_err(), "{bytes:02x?} gave {r:?}");
        }
        // Structs nested a thousand deep.
        let mut deep = header("");
        for _ in 0..1000 {
            deep.extend(hex("0c0001"));
        }
        let r = read_reply(&mut deep.as_slice(), "x", 0);
        assert!(
            matches!(&r, Err(ThriftError::Protocol(m)) if m.contains("too deep")),
            "{r:?}"
        );
    }
}
