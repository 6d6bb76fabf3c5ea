//! Deletion vectors, Iceberg format version 3's position deletes: a `deletion-vector-v1` blob in a
//! Puffin file names the deleted positions of one data file (the blob's `referenced-data-file`) as
//! a 64-bit Roaring bitmap. The blob is, in order: the length of the magic and the bitmap (4 bytes,
//! big-endian), the magic `D1 D3 39 64`, the bitmap in Roaring's portable 64-bit layout, and a
//! CRC-32 of the magic and the bitmap (4 bytes, big-endian).
//!
//! [`read`] gives a Puffin file's vectors by data file, as a position delete file's rows are given
//! (row_ids.rs reads both, each file once); [`write`] writes one Puffin file holding the vectors
//! it is given (a change gives it one: rows.rs says why), and gives each its delete file entry.

use std::collections::HashMap;

use bytes::Bytes;
use iceberg::io::FileIO;
use iceberg::puffin::{
    Blob, BlobMetadata, CompressionCodec, DELETION_VECTOR_V1, FileMetadata, PuffinReader,
    PuffinWriter,
};
use iceberg::spec::{DataContentType, DataFile, DataFileBuilder, DataFileFormat, Struct};
use roaring::RoaringTreemap;

/// What every Puffin file starts with.
pub(crate) const PUFFIN_MAGIC: [u8; 4] = *b"PFA1";
/// What a deletion vector's bitmap follows.
const VECTOR_MAGIC: [u8; 4] = [0xD1, 0xD3, 0x39, 0x64];
/// The field a vector's blob is about: the row position (`_pos`).
const ROW_POSITION_FIELD_ID: i32 = i32::MAX - 2;
/// The most positions a vector is read with: a few bytes of run containers can name billions of
/// positions, which as a list would take the process's memory. No data file holds this many rows.
const MAX_POSITIONS: u64 = 1 << 28;

fn invalid(location: &str, why: impl std::fmt::Display) -> iceberg::Error {
    iceberg::Error::new(
        iceberg::ErrorKind::DataInvalid,
        format!("deletion vector file {location}: {why}"),
    )
}

/// The positions (sorted) each deletion vector of the Puffin file at `location` deletes, by the
/// data file it is for; `bytes` is the whole file, already read. Blobs of other types are left
/// alone. A footer stored compressed is read through iceberg's Puffin reader.
pub(crate) async fn read(
    file_io: &FileIO,
    location: &str,
    bytes: &Bytes,
) -> iceberg::Result<HashMap<String, Vec<i64>>> {
    let Some(metadata) = footer(bytes, location)? else {
        return read_compressed(file_io, location).await;
    };
    let mut by_file = HashMap::new();
    for blob in metadata.blobs() {
        if blob.blob_type() != DELETION_VECTOR_V1 {
            continue;
        }
        let data_file = referenced_data_file(blob, location)?;
        let data = usize::try_from(blob.offset())
            .ok()
            .zip(usize::try_from(blob.length()).ok())
            .and_then(|(at, length)| bytes.get(at..at.checked_add(length)?))
            .filter(|_| blob.compression_codec() == CompressionCodec::None)
            .ok_or_else(|| invalid(location, "a vector lies outside the file, or is compressed"))?;
        by_file.insert(data_file, decode(data, location)?);
    }
    Ok(by_file)
}

/// The footer of the Puffin file `bytes`; None when it is stored compressed. Its layout: magic,
/// the footer's JSON, the JSON's length (4 bytes, little-endian), flags (4 bytes), magic.
fn footer(bytes: &[u8], location: &str) -> iceberg::Result<Option<FileMetadata>> {
    let bad = || invalid(location, "the Puffin footer does not read");
    let end = bytes.len().checked_sub(12).ok_or_else(bad)?;
    let tail = &bytes[end..];
    if tail[8..] != PUFFIN_MAGIC {
        return Err(bad());
    }
    if tail[4] & 1 != 0 {
        return Ok(None);
    }
    let length = u32::from_le_bytes([tail[0], tail[1], tail[2], tail[3]]) as usize;
    let start = end.checked_sub(length).ok_or_else(bad)?;
    if start < 4 || bytes[start - 4..start] != PUFFIN_MAGIC {
        return Err(bad());
    }
    serde_json::from_slice(&bytes[start..end])
        .map(Some)
        .map_err(|e| invalid(location, format!("the Puffin footer does not read: {e}")))
}

/// [`read`] for a Puffin file whose footer is stored compressed.
async fn read_compressed(
    file_io: &FileIO,
    location: &str,
) -> iceberg::Result<HashMap<String, Vec<i64>>> {
    let reader = PuffinReader::new(file_io.new_input(location)?);
    let metadata = reader.file_metadata().await?.clone();
    let mut by_file = HashMap::new();
    for blob in metadata.blobs() {
        if blob.blob_type() == DELETION_VECTOR_V1 {
            let data_file = referenced_data_file(blob, location)?;
            let data = reader.blob(blob).await?;
            by_file.insert(data_file, decode(data.data(), location)?);
        }
    }
    Ok(by_file)
}

fn referenced_data_file(blob: &BlobMetadata, location: &str) -> iceberg::Result<String> {
    blob.properties()
        .get("referenced-data-file")
        .cloned()
        .ok_or_else(|| invalid(location, "a vector names no referenced-data-file"))
}

/// The positions a vector's blob holds, sorted.
fn decode(blob: &[u8], location: &str) -> iceberg::Result<Vec<i64>> {
    if blob.len() < 12 {
        return Err(invalid(location, "a vector is shorter than its frame"));
    }
    let length = u32::from_be_bytes([blob[0], blob[1], blob[2], blob[3]]) as usize;
    if length < 4 || length + 8 != blob.len() {
        return Err(invalid(
            location,
            "a vector's length does not match its blob",
        ));
    }
    let (framed, crc) = blob[4..].split_at(length);
    if framed[..4] != VECTOR_MAGIC {
        return Err(invalid(location, "a vector lacks its magic bytes"));
    }
    let expected = u32::from_be_bytes([crc[0], crc[1], crc[2], crc[3]]);
    if crc32fast::hash(framed) != expected {
        return Err(invalid(location, "a vector's checksum does not match"));
    }
    let bitmap = RoaringTreemap::deserialize_from(&framed[4..])
        .map_err(|e| invalid(location, format!("a vector's bitmap does not read: {e}")))?;
    if bitmap.len() > MAX_POSITIONS {
        return Err(invalid(
            location,
            format!(
                "a vector deletes {} positions, more than the {MAX_POSITIONS} a data file can hold",
                bitmap.len()
            ),
        ));
    }
    bitmap
        .iter()
        .map(|p| i64::try_from(p).map_err(|_| invalid(location, "a position beyond i64")))
        .collect()
}

/// A vector's blob for `positions`.
fn encode(positions: &[i64]) -> Vec<u8> {
    let mut bitmap: RoaringTreemap = positions.iter().map(|p| *p as u64).collect();
    // Runs of positions as runs, as Iceberg's own writers store them.
    bitmap.optimize();
    let mut framed = VECTOR_MAGIC.to_vec();
    // Writing into a Vec cannot fail.
    let _ = bitmap.serialize_into(&mut framed);
    let mut blob = Vec::with_capacity(framed.len() + 8);
    blob.extend_from_slice(&(framed.len() as u32).to_be_bytes());
    blob.extend_from_slice(&framed);
    blob.extend_from_slice(&crc32fast::hash(&framed).to_be_bytes());
    blob
}

/// One data file's deleted positions, for [`write`].
pub(crate) struct Vector {
    /// The data file's path.
    pub data_file: String,
    /// Its partition spec and partition.
    pub spec_id: i32,
    pub partition: Struct,
    /// Every position deleted in it (those of earlier vectors and position delete files too).
    pub positions: Vec<i64>,
}

/// Writes `vectors` as one Puffin file at `location`, and gives each vector's delete file entry
/// (with its spec id): the Puffin file, the vector's offset and length in it, its data file, and
/// its cardinality as the record count.
pub(crate) async fn write(
    file_io: &FileIO,
    location: &str,
    vectors: Vec<Vector>,
) -> iceberg::Result<Vec<(i32, DataFile)>> {
    let output = file_io.new_output(location)?;
    let mut writer = PuffinWriter::new(&output, HashMap::new(), false).await?;
    // Blobs are written uncompressed after the 4-byte header, one after another.
    let mut offset = PUFFIN_MAGIC.len() as i64;
    let mut placed = Vec::with_capacity(vectors.len());
    for mut vector in vectors {
        let mut positions = std::mem::take(&mut vector.positions);
        positions.sort_unstable();
        positions.dedup();
        let data = encode(&positions);
        let length = data.len() as i64;
        let blob = Blob::builder()
            .r#type(DELETION_VECTOR_V1.to_string())
            .fields(vec![ROW_POSITION_FIELD_ID])
            .snapshot_id(-1)
            .sequence_number(-1)
            .data(data)
            .properties(HashMap::from([
                ("referenced-data-file".to_string(), vector.data_file.clone()),
                ("cardinality".to_string(), positions.len().to_string()),
            ]))
            .build();
        writer.add(blob, CompressionCodec::None).await?;
        placed.push((vector, positions.len() as u64, offset, length));
        offset += length;
    }
    writer.close().await?;
    let size = file_io.new_input(location)?.metadata().await?.size;
    placed
        .into_iter()
        .map(|(vector, cardinality, offset, length)| {
            DataFileBuilder::default()
                .content(DataContentType::PositionDeletes)
                .file_path(location.to_string())
                .file_format(DataFileFormat::Puffin)
                .partition(vector.partition)
                .partition_spec_id(vector.spec_id)
                .record_count(cardinality)
                .file_size_in_bytes(size)
                .referenced_data_file(Some(vector.data_file))
                .content_offset(Some(offset))
                .content_size_in_bytes(Some(length))
                .build()
                .map(|file| (vector.spec_id, file))
                .map_err(|e| invalid(location, e))
        })
        .collect()
}

/// Whether the file whose first bytes are `head` is a Puffin file.
pub(crate) fn is_puffin(head: &Bytes) -> bool {
    head.starts_with(&PUFFIN_MAGIC)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_vector_reads_back_and_a_damaged_one_is_refused() {
        let positions = vec![0, 3, 4, 70_000, 5_000_000_000];
        let blob = encode(&positions);
        assert_eq!(decode(&blob, "v").ok(), Some(positions));
        let mut flipped = blob.clone();
        let last = flipped.len() - 5;
        flipped[last] ^= 1;
        assert_eq!(
            decode(&flipped, "v").map_err(|e| e.message().to_string()),
            Err("deletion vector file v: a vector's checksum does not match".to_string())
        );
        assert_eq!(
            decode(&blob[..blob.len() - 1], "v").map_err(|e| e.message().to_string()),
            Err("deletion vector file v: a vector's length does not match its blob".to_string())
        );
        // A few bytes that name billions of positions: refused before they are listed.
        let mut huge = RoaringTreemap::new();
        huge.insert_range(0..(1 << 32));
        huge.optimize();
        let mut framed = VECTOR_MAGIC.to_vec();
        let _ = huge.serialize_into(&mut framed);
        let mut hostile = (framed.len() as u32).to_be_bytes().to_vec();
        hostile.extend_from_slice(&framed);
        hostile.extend_from_slice(&crc32fast::hash(&framed).to_be_bytes());
        assert!(hostile.len() < 1 << 21, "{}", hostile.len());
        assert_eq!(
            decode(&hostile, "v").map_err(|e| e.message().to_string()),
            Err("deletion vector file v: a vector deletes 4294967296 positions, more than the 268435456 a data file can hold".to_string())
        );
        // The layout Iceberg's spec gives: big-endian length, magic, bitmap, big-endian CRC.
        assert_eq!(&blob[4..8], &VECTOR_MAGIC);
        assert_eq!(
            u32::from_be_bytes([blob[0], blob[1], blob[2], blob[3]]) as usize,
            blob.len() - 8
        );
    }

    #[tokio::test]
    async fn a_puffin_file_of_vectors_reads_back() {
        let file_io = FileIO::new_with_memory();
        let location = "memory://t/data/v.puffin";
        let vector = |data_file: &str, positions: Vec<i64>| Vector {
            data_file: data_file.to_string(),
            spec_id: 0,
            partition: Struct::empty(),
            positions,
        };
        let entries = write(
            &file_io,
            location,
            vec![
                vector("a.parquet", vec![3, 1, 1]),
                vector("b.parquet", vec![7]),
            ],
        )
        .await
        .unwrap_or_else(|e| panic!("{e}"));
        let counts: Vec<u64> = entries.iter().map(|(_, f)| f.record_count()).collect();
        assert_eq!(counts, [2, 1]);
        let bytes = file_io
            .new_input(location)
            .unwrap_or_else(|e| panic!("{e}"))
            .read()
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(is_puffin(&bytes));
        let read = read(&file_io, location, &bytes)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            read,
            HashMap::from([
                ("a.parquet".to_string(), vec![1, 3]),
                ("b.parquet".to_string(), vec![7]),
            ])
        );
        // Each entry points at its own blob.
        for (_, entry) in &entries {
            let (Some(at), Some(length)) = (entry.content_offset(), entry.content_size_in_bytes())
            else {
                panic!("an entry without its blob's place");
            };
            let blob = &bytes[at as usize..(at + length) as usize];
            assert_eq!(&blob[4..8], &VECTOR_MAGIC);
        }
        let cut = bytes.slice(..bytes.len() - 3);
        assert!(
            read_err(&file_io, location, &cut)
                .await
                .contains("the Puffin footer does not read")
        );
    }

    async fn read_err(file_io: &FileIO, location: &str, bytes: &Bytes) -> String {
        match read(file_io, location, bytes).await {
            Ok(_) => panic!("a damaged file was read"),
            Err(e) => e.message().to_string(),
        }
    }
}
