//! DuckDB's DataChunk as Quack carries it (see WIRE.md): a row count, the columns' LogicalTypes and
//! one vector per column. A vector is flat (a validity mask and its values), or compressed as a
//! constant, a dictionary or a sequence, which clients send in appends. Reading keeps that shape;
//! nothing is expanded until the rows are turned into Arrow arrays.

use crate::codec::{DecodeResult, Reader, Writer};
use sqe_sessions::quote_identifier;

/// The most rows one chunk holds (DuckDB's vector size).
pub const MAX_ROWS: usize = 2048;

/// DuckDB's LogicalTypeIds that SQE reads and writes.
pub mod id {
    pub const SQLNULL: u8 = 1;
    pub const BOOLEAN: u8 = 10;
    pub const TINYINT: u8 = 11;
    pub const SMALLINT: u8 = 12;
    pub const INTEGER: u8 = 13;
    pub const BIGINT: u8 = 14;
    pub const DATE: u8 = 15;
    pub const TIME: u8 = 16;
    pub const TIMESTAMP_SEC: u8 = 17;
    pub const TIMESTAMP_MS: u8 = 18;
    pub const TIMESTAMP: u8 = 19;
    pub const TIMESTAMP_NS: u8 = 20;
    pub const DECIMAL: u8 = 21;
    pub const FLOAT: u8 = 22;
    pub const DOUBLE: u8 = 23;
    pub const CHAR: u8 = 24;
    pub const VARCHAR: u8 = 25;
    pub const BLOB: u8 = 26;
    pub const INTERVAL: u8 = 27;
    pub const UTINYINT: u8 = 28;
    pub const USMALLINT: u8 = 29;
    pub const UINTEGER: u8 = 30;
    pub const UBIGINT: u8 = 31;
    pub const TIMESTAMP_TZ: u8 = 32;
    pub const TIME_TZ: u8 = 34;
    pub const TIME_NS: u8 = 35;
    pub const BIT: u8 = 36;
    pub const BIGNUM: u8 = 39;
    pub const UHUGEINT: u8 = 49;
    pub const HUGEINT: u8 = 50;
    pub const UUID: u8 = 54;
    pub const STRUCT: u8 = 100;
    pub const LIST: u8 = 101;
    pub const MAP: u8 = 102;
    pub const ENUM: u8 = 104;
    pub const UNION: u8 = 107;
    pub const ARRAY: u8 = 108;
}

/// ExtraTypeInfo kinds.
mod info {
    pub const GENERIC: u8 = 1;
    pub const DECIMAL: u8 = 2;
    pub const STRING: u8 = 3;
    pub const LIST: u8 = 4;
    pub const STRUCT: u8 = 5;
    pub const ENUM: u8 = 6;
    pub const ARRAY: u8 = 9;
}

/// A column's type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogicalType {
    pub id: u8,
    pub info: TypeInfo,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TypeInfo {
    None,
    Decimal {
        width: u8,
        scale: u8,
    },
    /// A LIST's or MAP's child (a MAP's is STRUCT(key, value)).
    Child(Box<LogicalType>),
    Fields(Vec<(String, LogicalType)>),
    Enum(Vec<String>),
    Array(Box<LogicalType>, u32),
    /// An alias (JSON) or collation with nothing else.
    Other,
}

impl LogicalType {
    pub fn simple(id: u8) -> Self {
        Self {
            id,
            info: TypeInfo::None,
        }
    }

    /// Bytes per value of a fixed-width type; None for strings and nested types.
    pub fn width(&self) -> Option<usize> {
        use id::*;
        Some(match self.id {
            BOOLEAN | TINYINT | UTINYINT => 1,
            SMALLINT | USMALLINT => 2,
            INTEGER | UINTEGER | DATE | FLOAT => 4,
            BIGINT | UBIGINT | DOUBLE | TIME | TIME_NS | TIME_TZ | TIMESTAMP | TIMESTAMP_SEC
            | TIMESTAMP_MS | TIMESTAMP_NS | TIMESTAMP_TZ => 8,
            HUGEINT | UHUGEINT | UUID | INTERVAL => 16,
            DECIMAL => match self.info {
                TypeInfo::Decimal { width, .. } if width <= 4 => 2,
                TypeInfo::Decimal { width, .. } if width <= 9 => 4,
                TypeInfo::Decimal { width, .. } if width <= 18 => 8,
                _ => 16,
            },
            ENUM => match &self.info {
                TypeInfo::Enum(values) if values.len() <= 255 => 1,
                TypeInfo::Enum(values) if values.len() <= 65_535 => 2,
                _ => 4,
            },
            _ => return None,
        })
    }

    fn is_text(&self) -> bool {
        matches!(
            self.id,
            id::VARCHAR | id::CHAR | id::BLOB | id::BIT | id::BIGNUM
        )
    }

    pub fn read(r: &mut Reader<'_>) -> DecodeResult<Self> {
        r.begin()?;
        r.expect(100)?;
        let id = r.u8()?;
        let mut info = TypeInfo::None;
        if r.has(101)? && r.bool()? {
            r.begin()?;
            r.expect(100)?;
            let kind = r.u8()?;
            if r.has(101)? {
                r.string()?;
            }
            if r.has(102)? {
                return Err(r.error("type modifiers are not read"));
            }
            if r.has(103)? {
                return Err(r.error("extension type information is not read"));
            }
            info = match kind {
                info::GENERIC => TypeInfo::Other,
                info::DECIMAL => {
                    let width = if r.has(200)? { r.u8()? } else { 0 };
                    let scale = if r.has(201)? { r.u8()? } else { 0 };
                    if width == 0 || width > 38 || scale > width {
                        return Err(
                            r.error(format!("DECIMAL({width}, {scale}) is no decimal type"))
                        );
                    }
                    TypeInfo::Decimal { width, scale }
                }
                info::STRING => {
                    if r.has(200)? {
                        r.string()?;
                    }
                    TypeInfo::Other
                }
                info::LIST => {
                    r.expect(200)?;
                    TypeInfo::Child(Box::new(Self::read(r)?))
                }
                info::STRUCT => {
                    let mut fields = Vec::new();
                    if r.has(200)? {
                        for _ in 0..r.count()? {
                            r.begin()?;
                            r.expect(0)?;
                            let name = r.string()?;
                            r.expect(1)?;
                            let ty = Self::read(r)?;
                            r.end()?;
                            fields.push((name, ty));
                        }
                    }
                    TypeInfo::Fields(fields)
                }
                info::ENUM => {
                    r.expect(200)?;
                    let n = r.uleb()?;
                    r.expect(201)?;
                    let count = r.count()?;
                    if n != count as u64 {
                        return Err(r.error(format!("an ENUM of {n} values lists {count}")));
                    }
                    let values = (0..count)
                        .map(|_| r.string())
                        .collect::<DecodeResult<_>>()?;
                    TypeInfo::Enum(values)
                }
                info::ARRAY => {
                    r.expect(200)?;
                    let child = Self::read(r)?;
                    let size = if r.has(201)? { r.uleb()? } else { 0 };
                    let size = u32::try_from(size).map_err(|_| r.error("an ARRAY too long"))?;
                    TypeInfo::Array(Box::new(child), size)
                }
                other => {
                    return Err(r.error(format!("type information of kind {other} is not read")));
                }
            };
            r.end()?;
        }
        r.end()?;
        let ty = Self { id, info };
        let fits = match ty.id {
            id::LIST | id::MAP => matches!(ty.info, TypeInfo::Child(_)),
            id::STRUCT | id::UNION => matches!(ty.info, TypeInfo::Fields(_)),
            id::ARRAY => matches!(ty.info, TypeInfo::Array(..)),
            id::DECIMAL => matches!(ty.info, TypeInfo::Decimal { .. }),
            id::ENUM => matches!(ty.info, TypeInfo::Enum(_)),
            _ => ty.width().is_some() || ty.is_text() || ty.id == id::SQLNULL,
        };
        if !fits {
            return Err(r.error(format!(
                "type id {} is not read (or lacks its details)",
                ty.id
            )));
        }
        Ok(ty)
    }

    pub fn write(&self, w: &mut Writer) {
        w.field(100).uleb(u64::from(self.id));
        let kind = match &self.info {
            TypeInfo::None | TypeInfo::Other => None,
            TypeInfo::Decimal { .. } => Some(info::DECIMAL),
            TypeInfo::Child(_) => Some(info::LIST),
            TypeInfo::Fields(_) => Some(info::STRUCT),
            TypeInfo::Enum(_) => Some(info::ENUM),
            TypeInfo::Array(..) => Some(info::ARRAY),
        };
        if let Some(kind) = kind {
            w.field(101).bool(true);
            w.field(100).uleb(u64::from(kind));
            match &self.info {
                TypeInfo::Decimal { width, scale } => {
                    w.field(200).uleb(u64::from(*width));
                    if *scale != 0 {
                        w.field(201).uleb(u64::from(*scale));
                    }
                }
                TypeInfo::Child(child) => {
                    w.field(200);
                    child.write(w);
                }
                TypeInfo::Fields(fields) => {
                    if !fields.is_empty() {
                        w.field(200).uleb(fields.len() as u64);
                        for (name, ty) in fields {
                            w.field(0).string(name).field(1);
                            ty.write(w);
                            w.end();
                        }
                    }
                }
                TypeInfo::Enum(values) => {
                    w.field(200).uleb(values.len() as u64);
                    w.field(201).uleb(values.len() as u64);
                    for v in values {
                        w.string(v);
                    }
                }
                TypeInfo::Array(child, size) => {
                    w.field(200);
                    child.write(w);
                    if *size != 0 {
                        w.field(201).uleb(u64::from(*size));
                    }
                }
                TypeInfo::None | TypeInfo::Other => {}
            }
            w.end();
        }
        w.end();
    }

    /// The type as DuckDB's SQL spells it, for the `CREATE TABLE` text an ATTACH reads.
    pub fn sql(&self) -> String {
        use id::*;
        let name = match (self.id, &self.info) {
            (DECIMAL, TypeInfo::Decimal { width, scale }) => {
                return format!("DECIMAL({width}, {scale})");
            }
            (LIST, TypeInfo::Child(child)) => return format!("{}[]", child.sql()),
            (ARRAY, TypeInfo::Array(child, size)) => return format!("{}[{size}]", child.sql()),
            (MAP, TypeInfo::Child(entries)) => {
                return match &entries.info {
                    TypeInfo::Fields(kv) if kv.len() == 2 => {
                        format!("MAP({}, {})", kv[0].1.sql(), kv[1].1.sql())
                    }
                    _ => "MAP(VARCHAR, VARCHAR)".into(),
                };
            }
            (STRUCT, TypeInfo::Fields(fields)) => {
                let fields: Vec<String> = fields
                    .iter()
                    .map(|(name, ty)| format!("{} {}", quote_identifier(name), ty.sql()))
                    .collect();
                return format!("STRUCT({})", fields.join(", "));
            }
            (ENUM, TypeInfo::Enum(values)) => {
                let values: Vec<String> = values
                    .iter()
                    .map(|v| format!("'{}'", v.replace('\'', "''")))
                    .collect();
                return format!("ENUM({})", values.join(", "));
            }
            (SQLNULL, _) => "\"NULL\"",
            (BOOLEAN, _) => "BOOLEAN",
            (TINYINT, _) => "TINYINT",
            (SMALLINT, _) => "SMALLINT",
            (INTEGER, _) => "INTEGER",
            (BIGINT, _) => "BIGINT",
            (HUGEINT, _) => "HUGEINT",
            (UTINYINT, _) => "UTINYINT",
            (USMALLINT, _) => "USMALLINT",
            (UINTEGER, _) => "UINTEGER",
            (UBIGINT, _) => "UBIGINT",
            (UHUGEINT, _) => "UHUGEINT",
            (FLOAT, _) => "FLOAT",
            (DOUBLE, _) => "DOUBLE",
            (DATE, _) => "DATE",
            (TIME, _) => "TIME",
            (TIME_NS, _) => "TIME_NS",
            (TIME_TZ, _) => "TIME WITH TIME ZONE",
            (TIMESTAMP_SEC, _) => "TIMESTAMP_S",
            (TIMESTAMP_MS, _) => "TIMESTAMP_MS",
            (TIMESTAMP, _) => "TIMESTAMP",
            (TIMESTAMP_NS, _) => "TIMESTAMP_NS",
            (TIMESTAMP_TZ, _) => "TIMESTAMP WITH TIME ZONE",
            (INTERVAL, _) => "INTERVAL",
            (UUID, _) => "UUID",
            (BLOB, _) => "BLOB",
            (BIT, _) => "BIT",
            (BIGNUM, _) => "BIGNUM",
            _ => "VARCHAR",
        };
        name.into()
    }
}

/// One column of a chunk, as sent.
#[derive(Debug, Clone, PartialEq)]
pub enum Vector {
    Flat {
        /// u64 words, bit i of the mask = row i, 1 = valid; None: every row valid.
        validity: Option<Vec<u64>>,
        data: Data,
    },
    /// One value for every row.
    Constant(Box<Vector>),
    /// Row i is `dictionary[selection[i]]`.
    Dictionary {
        selection: Vec<u32>,
        /// The dictionary's values.
        size: usize,
        dictionary: Box<Vector>,
    },
    /// Row i is `start + i * increment` (integer columns).
    Sequence { start: i64, increment: i64 },
}

#[derive(Debug, Clone, PartialEq)]
pub enum Data {
    /// Values of a fixed-width type, little-endian.
    Fixed(Vec<u8>),
    /// Strings and blobs.
    Text(Vec<Vec<u8>>),
    /// STRUCT fields, each a vector of the same rows.
    Fields(Vec<Vector>),
    /// LIST and MAP: each row's (offset, length) into the child.
    List {
        entries: Vec<(u64, u64)>,
        /// The child's values.
        size: usize,
        child: Box<Vector>,
    },
    /// ARRAY: `size` child values per row.
    Array { size: u64, child: Box<Vector> },
    /// SQLNULL columns carry nothing.
    Nothing,
}

impl Vector {
    /// A vector of `count` rows of type `ty`.
    pub fn read(r: &mut Reader<'_>, ty: &LogicalType, count: usize) -> DecodeResult<Self> {
        r.begin()?;
        let kind = if r.has(90)? { r.u8()? } else { 0 };
        let vector = match kind {
            0 => Self::read_flat(r, ty, count)?,
            2 => Vector::Constant(Box::new(Self::read_flat(r, ty, 1)?)),
            3 => {
                r.expect(91)?;
                let bytes = r.bytes()?;
                if bytes.len() != 4 * count {
                    return Err(r.error(format!(
                        "a selection of {} bytes for {count} rows",
                        bytes.len()
                    )));
                }
                let selection: Vec<u32> = bytes
                    .chunks_exact(4)
                    .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                    .collect();
                r.expect(92)?;
                let size = r.uleb()?;
                let size = usize::try_from(size)
                    .ok()
                    .filter(|s| *s <= MAX_ROWS.max(count))
                    .ok_or_else(|| r.error(format!("a dictionary of {size} values")))?;
                if let Some(bad) = selection.iter().find(|s| **s as usize >= size) {
                    return Err(r.error(format!("row {bad} of a dictionary of {size}")));
                }
                let dictionary = Box::new(Self::read_flat(r, ty, size)?);
                Vector::Dictionary {
                    selection,
                    size,
                    dictionary,
                }
            }
            4 => {
                r.expect(91)?;
                let start = r.sleb()?;
                r.expect(92)?;
                let increment = r.sleb()?;
                if ty.width().is_none() || matches!(ty.id, id::FLOAT | id::DOUBLE) {
                    return Err(r.error(format!("a sequence of type id {}", ty.id)));
                }
                Vector::Sequence { start, increment }
            }
            other => return Err(r.error(format!("vector kind {other} is not read"))),
        };
        r.end()?;
        Ok(vector)
    }

    /// The fields of a flat vector (in an object already begun).
    fn read_flat(r: &mut Reader<'_>, ty: &LogicalType, count: usize) -> DecodeResult<Self> {
        r.expect(100)?;
        let validity = if r.bool()? {
            r.expect(101)?;
            let bytes = r.bytes()?;
            if bytes.len() != count.div_ceil(64) * 8 {
                return Err(r.error(format!(
                    "a validity mask of {} bytes for {count} rows",
                    bytes.len()
                )));
            }
            Some(
                bytes
                    .chunks_exact(8)
                    .map(|b| u64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]))
                    .collect(),
            )
        } else {
            None
        };
        let data = if ty.id == id::SQLNULL {
            Data::Nothing
        } else if let Some(width) = ty.width() {
            r.expect(102)?;
            let bytes = r.bytes()?;
            if bytes.len() != width * count {
                return Err(r.error(format!(
                    "{} bytes of values for {count} rows of {width} bytes",
                    bytes.len()
                )));
            }
            Data::Fixed(bytes.to_vec())
        } else if ty.is_text() {
            r.expect(102)?;
            let n = r.count()?;
            if n != count {
                return Err(r.error(format!("{n} strings for {count} rows")));
            }
            Data::Text(
                (0..n)
                    .map(|_| r.bytes().map(<[u8]>::to_vec))
                    .collect::<DecodeResult<_>>()?,
            )
        } else {
            match &ty.info {
                TypeInfo::Fields(fields) => {
                    r.expect(103)?;
                    let n = r.count()?;
                    if n != fields.len() {
                        return Err(r.error(format!("{n} children for {} fields", fields.len())));
                    }
                    let children = fields
                        .iter()
                        .map(|(_, t)| Self::read(r, t, count))
                        .collect::<DecodeResult<_>>()?;
                    Data::Fields(children)
                }
                TypeInfo::Child(child) => {
                    r.expect(104)?;
                    let size = r.uleb()?;
                    r.expect(105)?;
                    let n = r.count()?;
                    if n != count {
                        return Err(r.error(format!("{n} list entries for {count} rows")));
                    }
                    let mut entries = Vec::with_capacity(n);
                    for _ in 0..n {
                        r.begin()?;
                        r.expect(100)?;
                        let offset = r.uleb()?;
                        r.expect(101)?;
                        let length = r.uleb()?;
                        r.end()?;
                        if offset.checked_add(length).is_none_or(|end| end > size) {
                            return Err(r.error(format!(
                                "a list entry ({offset}, {length}) past the {size} child values"
                            )));
                        }
                        entries.push((offset, length));
                    }
                    r.expect(106)?;
                    let size = child_rows(r, size)?;
                    let child = Box::new(Self::read(r, child, size)?);
                    Data::List {
                        entries,
                        size,
                        child,
                    }
                }
                TypeInfo::Array(child, size) => {
                    r.expect(103)?;
                    let sent = r.uleb()?;
                    if sent != u64::from(*size) {
                        return Err(r.error(format!("an ARRAY of {sent} in a type of {size}")));
                    }
                    r.expect(104)?;
                    let rows = child_rows(r, sent.saturating_mul(count as u64))?;
                    let child = Box::new(Self::read(r, child, rows)?);
                    Data::Array { size: sent, child }
                }
                _ => return Err(r.error(format!("type id {} carries no values here", ty.id))),
            }
        };
        Ok(Vector::Flat { validity, data })
    }
}

/// How many values a child vector holds: never more than its bytes could (a value takes one byte
/// at least, or a bit of a mask; SQLNULL children are refused the room to grow).
fn child_rows(r: &Reader<'_>, size: u64) -> DecodeResult<usize> {
    usize::try_from(size)
        .ok()
        .filter(|s| *s <= r.left().saturating_mul(8))
        .ok_or_else(|| {
            r.error(format!(
                "{size} child values announced, {} bytes left",
                r.left()
            ))
        })
}

/// A chunk: its rows, types and one vector per column.
#[derive(Debug, Clone, PartialEq)]
pub struct Chunk {
    pub rows: usize,
    pub types: Vec<LogicalType>,
    pub vectors: Vec<Vector>,
}

impl Chunk {
    /// A DataChunk object.
    pub fn read(r: &mut Reader<'_>) -> DecodeResult<Self> {
        r.begin()?;
        r.expect(100)?;
        let rows = r.uleb()?;
        let rows = usize::try_from(rows)
            .ok()
            .filter(|n| *n <= MAX_ROWS)
            .ok_or_else(|| r.error(format!("a chunk of {rows} rows (at most {MAX_ROWS})")))?;
        r.expect(101)?;
        let types = (0..r.count()?)
            .map(|_| LogicalType::read(r))
            .collect::<DecodeResult<Vec<_>>>()?;
        r.expect(102)?;
        let n = r.count()?;
        if n != types.len() {
            return Err(r.error(format!("{n} vectors for {} types", types.len())));
        }
        let vectors = types
            .iter()
            .map(|t| Vector::read(r, t, rows))
            .collect::<DecodeResult<_>>()?;
        r.end()?;
        Ok(Self {
            rows,
            types,
            vectors,
        })
    }
}

/// The DataChunkWrapper object `{300: chunk}` (after its presence byte).
pub fn read_wrapper(r: &mut Reader<'_>) -> DecodeResult<Chunk> {
    r.begin()?;
    r.expect(300)?;
    let chunk = Chunk::read(r)?;
    r.end()?;
    Ok(chunk)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A DataChunk of one INTEGER column, flat, with its validity mask.
    pub(crate) fn write_int_chunk(w: &mut Writer, values: &[Option<i32>]) {
        w.field(100).uleb(values.len() as u64);
        w.field(101).uleb(1);
        LogicalType::simple(id::INTEGER).write(w);
        w.field(102).uleb(1);
        let nulls = values.iter().any(Option::is_none);
        w.field(100).bool(nulls);
        if nulls {
            let mut mask = vec![0u64; values.len().div_ceil(64)];
            for (i, v) in values.iter().enumerate() {
                if v.is_some() {
                    mask[i / 64] |= 1 << (i % 64);
                }
            }
            let bytes: Vec<u8> = mask.iter().flat_map(|m| m.to_le_bytes()).collect();
            w.field(101).bytes(&bytes);
        }
        let data: Vec<u8> = values
            .iter()
            .flat_map(|v| v.unwrap_or(i32::MIN).to_le_bytes())
            .collect();
        w.field(102).bytes(&data);
        w.end();
        w.end();
    }

    #[test]
    fn chunks_read_as_duckdb_writes_them() {
        let mut w = Writer::new();
        w.field(300);
        write_int_chunk(&mut w, &[Some(1), None, Some(3)]);
        w.end();
        let bytes = w.into_bytes();
        let chunk = read_wrapper(&mut Reader::new(&bytes)).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(chunk.rows, 3);
        assert_eq!(chunk.types, [LogicalType::simple(id::INTEGER)]);
        let want = Vector::Flat {
            validity: Some(vec![0b101]),
            data: Data::Fixed(
                [1i32, i32::MIN, 3]
                    .iter()
                    .flat_map(|v| v.to_le_bytes())
                    .collect(),
            ),
        };
        assert_eq!(chunk.vectors, [want]);
    }

    #[test]
    fn compressed_and_nested_vectors_read() {
        // Three rows: a BIGINT sequence 10, 12, 14; a constant VARCHAR; a dictionary of VARCHAR;
        // an INTEGER[] list [[1, 2], [], [3]].
        let list = LogicalType {
            id: id::LIST,
            info: TypeInfo::Child(Box::new(LogicalType::simple(id::INTEGER))),
        };
        let types = [
            LogicalType::simple(id::BIGINT),
            LogicalType::simple(id::VARCHAR),
            LogicalType::simple(id::VARCHAR),
            list.clone(),
        ];
        let mut w = Writer::new();
        w.field(100).uleb(3).field(101).uleb(4);
        for t in &types {
            t.write(&mut w);
        }
        w.field(102).uleb(4);
        w.field(90)
            .uleb(4)
            .field(91)
            .sleb(10)
            .field(92)
            .sleb(2)
            .end();
        w.field(90)
            .uleb(2)
            .field(100)
            .bool(false)
            .field(102)
            .uleb(1)
            .string("same")
            .end();
        let selection: Vec<u8> = [1u32, 0, 1].iter().flat_map(|v| v.to_le_bytes()).collect();
        w.field(90)
            .uleb(3)
            .field(91)
            .bytes(&selection)
            .field(92)
            .uleb(2);
        w.field(100)
            .bool(false)
            .field(102)
            .uleb(2)
            .string("a")
            .string("b")
            .end();
        w.field(100)
            .bool(false)
            .field(104)
            .uleb(3)
            .field(105)
            .uleb(3);
        for (offset, length) in [(0u64, 2u64), (2, 0), (2, 1)] {
            w.field(100).uleb(offset).field(101).uleb(length).end();
        }
        let ints: Vec<u8> = [1i32, 2, 3].iter().flat_map(|v| v.to_le_bytes()).collect();
        w.field(106)
            .field(100)
            .bool(false)
            .field(102)
            .bytes(&ints)
            .end();
        w.end();
        w.end();
        let bytes = w.into_bytes();
        let chunk = Chunk::read(&mut Reader::new(&bytes)).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(chunk.types, types);
        assert_eq!(
            chunk.vectors[0],
            Vector::Sequence {
                start: 10,
                increment: 2
            }
        );
        assert!(
            matches!(&chunk.vectors[1], Vector::Constant(v) if matches!(&**v, Vector::Flat { data: Data::Text(t), .. } if t == &[b"same".to_vec()]))
        );
        assert!(
            matches!(&chunk.vectors[2], Vector::Dictionary { selection, .. } if selection == &[1, 0, 1])
        );
        assert!(
            matches!(&chunk.vectors[3], Vector::Flat { data: Data::List { entries, .. }, .. } if entries == &[(0, 2), (2, 0), (2, 1)])
        );
        // A list entry past its child values is refused.
        let mut w = Writer::new();
        w.field(100).uleb(1).field(101).uleb(1);
        list.write(&mut w);
        w.field(102).uleb(1);
        w.field(100)
            .bool(false)
            .field(104)
            .uleb(3)
            .field(105)
            .uleb(1);
        w.field(100).uleb(0).field(101).uleb(5).end();
        w.field(106)
            .field(100)
            .bool(false)
            .field(102)
            .bytes(&ints)
            .end();
        w.end().end();
        let bytes = w.into_bytes();
        let e = Chunk::read(&mut Reader::new(&bytes))
            .err()
            .map(|e| e.message);
        assert_eq!(
            e.as_deref(),
            Some("a list entry (0, 5) past the 3 child values")
        );
    }

    #[test]
    fn types_round_trip() {
        let decimal = LogicalType {
            id: id::DECIMAL,
            info: TypeInfo::Decimal {
                width: 10,
                scale: 2,
            },
        };
        let map = LogicalType {
            id: id::MAP,
            info: TypeInfo::Child(Box::new(LogicalType {
                id: id::STRUCT,
                info: TypeInfo::Fields(vec![
                    ("key".into(), LogicalType::simple(id::VARCHAR)),
                    ("value".into(), decimal.clone()),
                ]),
            })),
        };
        for ty in [LogicalType::simple(id::UUID), decimal, map] {
            let mut w = Writer::new();
            ty.write(&mut w);
            let bytes = w.into_bytes();
            assert_eq!(LogicalType::read(&mut Reader::new(&bytes)), Ok(ty));
        }
        // DuckDB's INTEGER type object: {100: 13}.
        let mut w = Writer::new();
        LogicalType::simple(id::INTEGER).write(&mut w);
        assert_eq!(w.into_bytes(), [0x64, 0x00, 0x0d, 0xff, 0xff]);
    }
}
