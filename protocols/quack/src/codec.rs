//! DuckDB's BinarySerializer format, as Quack carries it: objects are `u16` little-endian field ids
//! followed by their values, in ascending order, closed by `0xFFFF`; integers are LEB128 (unsigned
//! ULEB, signed SLEB), a hugeint is SLEB(upper) then ULEB(lower), booleans one byte, floats and
//! doubles their raw little-endian bytes, strings and blobs a ULEB length and the bytes, lists a ULEB
//! count and the items, and a nullable value a presence byte before it. A field equal to its default
//! may be left out; the reader says which fields it takes and refuses any other.
//!
//! The reader is built for hostile input: every length is checked against what is left, nesting is
//! bounded, and each error names what was wrong and where.

use std::fmt;

/// The field id that ends an object.
const END: u16 = 0xFFFF;

/// How deep objects may nest in one message (a LIST of STRUCT of LIST … type or vector).
pub const MAX_DEPTH: usize = 64;

/// Why a message could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecodeError {
    pub offset: usize,
    pub message: String,
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "malformed Quack message at byte {}: {}",
            self.offset, self.message
        )
    }
}

impl std::error::Error for DecodeError {}

pub type DecodeResult<T> = Result<T, DecodeError>;

/// Writes one message.
#[derive(Debug, Default)]
pub struct Writer {
    buf: Vec<u8>,
}

impl Writer {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn into_bytes(self) -> Vec<u8> {
        self.buf
    }

    pub fn field(&mut self, id: u16) -> &mut Self {
        self.buf.extend_from_slice(&id.to_le_bytes());
        self
    }

    pub fn end(&mut self) -> &mut Self {
        self.buf.extend_from_slice(&END.to_le_bytes());
        self
    }

    pub fn uleb(&mut self, mut v: u64) -> &mut Self {
        loop {
            let byte = (v & 0x7f) as u8;
            v >>= 7;
            if v == 0 {
                self.buf.push(byte);
                return self;
            }
            self.buf.push(byte | 0x80);
        }
    }

    pub fn sleb(&mut self, mut v: i64) -> &mut Self {
        loop {
            let byte = (v & 0x7f) as u8;
            v >>= 7;
            let done = (v == 0 && byte & 0x40 == 0) || (v == -1 && byte & 0x40 != 0);
            if done {
                self.buf.push(byte);
                return self;
            }
            self.buf.push(byte | 0x80);
        }
    }

    pub fn bool(&mut self, v: bool) -> &mut Self {
        self.buf.push(u8::from(v));
        self
    }

    /// A hugeint: its upper half (signed), then its lower half.
    pub fn hugeint(&mut self, v: i128) -> &mut Self {
        self.sleb((v >> 64) as i64).uleb(v as u64)
    }

    pub fn bytes(&mut self, v: &[u8]) -> &mut Self {
        self.uleb(v.len() as u64);
        self.buf.extend_from_slice(v);
        self
    }

    pub fn string(&mut self, v: &str) -> &mut Self {
        self.bytes(v.as_bytes())
    }

    /// Raw bytes with no length before them (inside a value whose length is already written).
    pub fn raw(&mut self, v: &[u8]) -> &mut Self {
        self.buf.extend_from_slice(v);
        self
    }
}

/// Reads one message, strictly.
#[derive(Debug)]
pub struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
    depth: usize,
}

impl<'a> Reader<'a> {
    pub fn new(buf: &'a [u8]) -> Self {
        Self {
            buf,
            pos: 0,
            depth: 0,
        }
    }

    pub fn error(&self, message: impl Into<String>) -> DecodeError {
        DecodeError {
            offset: self.pos,
            message: message.into(),
        }
    }

    pub fn left(&self) -> usize {
        self.buf.len() - self.pos
    }

    pub fn is_done(&self) -> bool {
        self.pos == self.buf.len()
    }

    fn take(&mut self, n: usize) -> DecodeResult<&'a [u8]> {
        if n > self.left() {
            return Err(self.error(format!("{n} bytes announced, {} left", self.left())));
        }
        let out = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(out)
    }

    fn peek_field(&self) -> DecodeResult<u16> {
        match self.buf.get(self.pos..self.pos + 2) {
            Some(b) => Ok(u16::from_le_bytes([b[0], b[1]])),
            None => Err(self.error("the message ends inside an object")),
        }
    }

    /// Enters an object (counts its depth).
    pub fn begin(&mut self) -> DecodeResult<()> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(self.error(format!("objects nest deeper than {MAX_DEPTH}")));
        }
        Ok(())
    }

    /// Leaves an object: its end marker must come next.
    pub fn end(&mut self) -> DecodeResult<()> {
        let id = self.peek_field()?;
        if id != END {
            return Err(self.error(format!("unexpected field {id} where the object ends")));
        }
        self.pos += 2;
        self.depth -= 1;
        Ok(())
    }

    /// Whether field `id` comes next (consumed if so). Fields come in ascending order, so a
    /// smaller one than the next field the reader knows is an error at the object's end.
    pub fn has(&mut self, id: u16) -> DecodeResult<bool> {
        let next = self.peek_field()?;
        if next == id {
            self.pos += 2;
            return Ok(true);
        }
        Ok(false)
    }

    /// Field `id`, which must come next.
    pub fn expect(&mut self, id: u16) -> DecodeResult<()> {
        if self.has(id)? {
            return Ok(());
        }
        let next = self.peek_field()?;
        Err(self.error(format!("field {id} expected, found {next}")))
    }

    pub fn uleb(&mut self) -> DecodeResult<u64> {
        let mut v: u64 = 0;
        for shift in (0..70).step_by(7) {
            let byte = *self.take(1)?.first().unwrap_or(&0);
            if shift == 63 && byte > 1 {
                return Err(self.error("an unsigned integer overflows 64 bits"));
            }
            v |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(self.error("an unsigned integer runs past 10 bytes"))
    }

    pub fn sleb(&mut self) -> DecodeResult<i64> {
        let mut v: i64 = 0;
        let mut shift = 0u32;
        loop {
            let byte = *self.take(1)?.first().unwrap_or(&0);
            if shift == 63 && byte & 0x7e != 0 && byte & 0x7e != 0x7e {
                return Err(self.error("a signed integer overflows 64 bits"));
            }
            v |= i64::from(byte & 0x7f) << shift;
            shift += 7;
            if byte & 0x80 == 0 {
                if shift < 64 && byte & 0x40 != 0 {
                    v |= -1i64 << shift;
                }
                return Ok(v);
            }
            if shift >= 70 {
                return Err(self.error("a signed integer runs past 10 bytes"));
            }
        }
    }

    /// String field `id` if it comes next, else its default (empty).
    pub fn string_field(&mut self, id: u16) -> DecodeResult<String> {
        if self.has(id)? {
            return self.string();
        }
        Ok(String::new())
    }

    /// An unsigned integer that must fit `u8` (an enum's value).
    pub fn u8(&mut self) -> DecodeResult<u8> {
        let v = self.uleb()?;
        u8::try_from(v).map_err(|_| self.error(format!("{v} does not fit one byte")))
    }

    pub fn bool(&mut self) -> DecodeResult<bool> {
        match self.take(1)?[0] {
            0 => Ok(false),
            1 => Ok(true),
            b => Err(self.error(format!("{b} is no boolean"))),
        }
    }

    pub fn hugeint(&mut self) -> DecodeResult<i128> {
        let upper = self.sleb()?;
        let lower = self.uleb()?;
        Ok((i128::from(upper) << 64) | i128::from(lower))
    }

    pub fn bytes(&mut self) -> DecodeResult<&'a [u8]> {
        let n = self.uleb()?;
        let n = usize::try_from(n).map_err(|_| self.error("a length past the address space"))?;
        self.take(n)
    }

    pub fn string(&mut self) -> DecodeResult<String> {
        let bytes = self.bytes()?;
        String::from_utf8(bytes.to_vec()).map_err(|_| self.error("a string is not UTF-8"))
    }

    /// A list's count, which cannot promise more items than bytes are left (each takes one at
    /// least).
    pub fn count(&mut self) -> DecodeResult<usize> {
        let n = self.uleb()?;
        match usize::try_from(n) {
            Ok(n) if n <= self.left() => Ok(n),
            _ => Err(self.error(format!(
                "a list of {n} items announced, {} bytes left",
                self.left()
            ))),
        }
    }

    /// Raw bytes of a known length.
    pub fn raw(&mut self, n: usize) -> DecodeResult<&'a [u8]> {
        self.take(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_round_trip() {
        for v in [0u64, 1, 127, 128, 300, u32::MAX as u64, u64::MAX] {
            let mut w = Writer::new();
            w.uleb(v);
            let bytes = w.into_bytes();
            assert_eq!(Reader::new(&bytes).uleb(), Ok(v), "{v}");
        }
        for v in [0i64, 1, -1, 63, 64, -64, -65, i64::MIN, i64::MAX] {
            let mut w = Writer::new();
            w.sleb(v);
            let bytes = w.into_bytes();
            assert_eq!(Reader::new(&bytes).sleb(), Ok(v), "{v}");
        }
        for v in [
            0i128,
            -1,
            1 << 70,
            i128::MIN,
            i128::MAX,
            0x8000_0000_0000_0000,
        ] {
            let mut w = Writer::new();
            w.hugeint(v);
            let bytes = w.into_bytes();
            assert_eq!(Reader::new(&bytes).hugeint(), Ok(v), "{v}");
        }
        // 2^64 - 1 as an absent optional index: nine 0xFF then 0x01.
        let mut w = Writer::new();
        w.uleb(u64::MAX);
        assert_eq!(
            w.into_bytes(),
            [0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01]
        );
    }

    #[test]
    fn hostile_lengths_are_errors() {
        // A string of 2^40 bytes announced in a 6-byte message.
        let mut w = Writer::new();
        w.uleb(1 << 40);
        let bytes = w.into_bytes();
        let e = Reader::new(&bytes).bytes().err().map(|e| e.message);
        assert_eq!(e.as_deref(), Some("1099511627776 bytes announced, 0 left"));
        // Eleven continuation bytes.
        let e = Reader::new(&[0x80; 11]).uleb().err().map(|e| e.message);
        assert_eq!(e.as_deref(), Some("an unsigned integer overflows 64 bits"));
        let e = Reader::new(&[0x80; 11]).sleb().err().map(|e| e.message);
        assert_eq!(e.as_deref(), Some("a signed integer runs past 10 bytes"));
        let e = Reader::new(&[0xff; 9].iter().chain(&[0x7f]).copied().collect::<Vec<_>>())
            .uleb()
            .err()
            .map(|e| e.message);
        assert_eq!(e.as_deref(), Some("an unsigned integer overflows 64 bits"));
        let e = Reader::new(&[2]).bool().err().map(|e| e.message);
        assert_eq!(e.as_deref(), Some("2 is no boolean"));
        let mut r = Reader::new(&[]);
        assert!(r.begin().is_ok());
        assert_eq!(
            r.end().err().map(|e| e.message).as_deref(),
            Some("the message ends inside an object")
        );
    }
}
