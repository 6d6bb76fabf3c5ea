//! Reading ahead in a file of an object store. DataFusion's Parquet reader asks for one row group's
//! column chunks at a time and decodes them before it asks for the next, so a scan of a store
//! that answers each request in tens of milliseconds waits that long for every row group. Once a
//! reader has asked for some columns of a row group, [`ReadAhead`] starts fetching the same columns
//! of the next row groups of its byte range, so that they are there, or on their way, when asked
//! for.
//!
//! What it fetches is whole column chunks; a request it then answers may be for some pages of them
//! (the page index selected rows), which are slices of the chunks. A request it cannot answer
//! from what it fetched goes to the store as before, and a row group the reader skipped (pruned by
//! statistics) only costs the bytes fetched for it. At most [`DEPTH`] row groups and
//! [`MAX_AHEAD_BYTES`] are in flight for one reader.

use std::collections::{HashMap, VecDeque};
use std::ops::Range;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use datafusion::object_store::ObjectStore;
use datafusion::object_store::path::Path;
use parquet::file::metadata::{ParquetMetaData, RowGroupMetaData};
use tokio::task::JoinHandle;

use super::file_io_store::FileIoStore;

/// Row groups fetched ahead of the one being read.
pub(crate) const DEPTH: usize = 2;

/// Bytes fetched ahead for one reader at most.
pub(crate) const MAX_AHEAD_BYTES: u64 = 64 << 20;

type Fetched = Result<Vec<Bytes>, datafusion::object_store::Error>;

/// The footers of a scan's files, by path: DataFusion reads a file's footer with one reader and
/// may decode its rows with another (after its bloom filters), which must know the footer too.
pub(crate) type Footers = Arc<Mutex<HashMap<Path, Arc<ParquetMetaData>>>>;

/// One reader's row groups on their way.
pub(crate) struct ReadAhead {
    store: Arc<FileIoStore>,
    path: Path,
    /// The reader's byte range of the file: the row groups whose first page starts in it are its.
    range: Range<u64>,
    footers: Footers,
    ahead: VecDeque<Ahead>,
}

struct Ahead {
    row_group: usize,
    /// The column chunks fetched, in the order of `fetch`'s bytes.
    chunks: Vec<Range<u64>>,
    fetch: JoinHandle<Fetched>,
}

impl ReadAhead {
    pub(crate) fn new(
        store: Arc<FileIoStore>,
        path: Path,
        range: Range<u64>,
        footers: Footers,
    ) -> Self {
        Self {
            store,
            path,
            range,
            footers,
            ahead: VecDeque::new(),
        }
    }

    /// The file's footer, once a reader of the scan has it.
    pub(crate) fn set_metadata(&mut self, metadata: Arc<ParquetMetaData>) {
        let mut footers = self.footers.lock().unwrap_or_else(|e| e.into_inner());
        footers.insert(self.path.clone(), metadata);
    }

    fn metadata(&self) -> Option<Arc<ParquetMetaData>> {
        let footers = self.footers.lock().unwrap_or_else(|e| e.into_inner());
        footers.get(&self.path).cloned()
    }

    /// `ranges`, which a reader asks for: first the same columns of the row groups after theirs
    /// start on their way (up to [`DEPTH`] ahead), then `ranges` come from what was fetched ahead
    /// if it holds them all. None sends the request to the store as usual (also when fetching
    /// ahead failed: the store then reports why).
    pub(crate) async fn read(&mut self, ranges: &[Range<u64>]) -> Option<Vec<Bytes>> {
        let metadata = self.metadata()?;
        let (row_group, columns) = columns_of(&metadata, ranges)?;
        self.fetch_after(&metadata, row_group, &columns);
        // Row groups before this one were skipped by the reader: their bytes are not needed.
        while let Some(first) = self.ahead.front()
            && first.row_group < row_group
        {
            if let Some(skipped) = self.ahead.pop_front() {
                skipped.fetch.abort();
            }
        }
        if self.ahead.front()?.row_group != row_group {
            return None;
        }
        let ahead = self.ahead.pop_front()?;
        let bytes = ahead.fetch.await.ok()?.ok()?;
        slices(&ahead.chunks, &bytes, ranges)
    }

    /// Starts fetching `columns` of the row groups after `row_group`, up to [`DEPTH`] ahead.
    fn fetch_after(&mut self, metadata: &ParquetMetaData, row_group: usize, columns: &[usize]) {
        let mut bytes: u64 = self
            .ahead
            .iter()
            .flat_map(|a| &a.chunks)
            .map(|c| c.end - c.start)
            .sum();
        let mut next = self
            .ahead
            .back()
            .map_or(row_group, |a| a.row_group.max(row_group))
            + 1;
        while self.ahead.len() < DEPTH && next < metadata.num_row_groups() {
            let group = metadata.row_group(next);
            if !self.range.contains(&first_page(group)) {
                break;
            }
            let chunks: Vec<Range<u64>> = columns.iter().map(|c| chunk(group, *c)).collect();
            bytes += chunks.iter().map(|c| c.end - c.start).sum::<u64>();
            if bytes > MAX_AHEAD_BYTES {
                break;
            }
            let (store, path, wanted) = (self.store.clone(), self.path.clone(), chunks.clone());
            let fetch = tokio::spawn(async move { store.get_ranges(&path, &wanted).await });
            self.ahead.push_back(Ahead {
                row_group: next,
                chunks,
                fetch,
            });
            next += 1;
        }
    }
}

impl Drop for ReadAhead {
    fn drop(&mut self) {
        for ahead in &self.ahead {
            ahead.fetch.abort();
        }
    }
}

/// Where a row group starts: its first column's first page (DataFusion assigns row groups to byte
/// ranges by it).
fn first_page(group: &RowGroupMetaData) -> u64 {
    let column = group.column(0);
    let offset = column
        .dictionary_page_offset()
        .unwrap_or_else(|| column.data_page_offset());
    u64::try_from(offset).unwrap_or(0)
}

/// The bytes of column `c` of a row group.
fn chunk(group: &RowGroupMetaData, c: usize) -> Range<u64> {
    let (start, length) = group.column(c).byte_range();
    start..start + length
}

/// The row group whose column chunks hold all of `ranges`, and those columns (each once, in
/// order); None if the ranges are not all within one row group's chunks.
fn columns_of(metadata: &ParquetMetaData, ranges: &[Range<u64>]) -> Option<(usize, Vec<usize>)> {
    let first = ranges.first()?;
    let row_group = (0..metadata.num_row_groups()).find(|g| {
        let group = metadata.row_group(*g);
        (0..group.num_columns()).any(|c| contains(&chunk(group, c), first))
    })?;
    let group = metadata.row_group(row_group);
    let mut columns = Vec::new();
    for range in ranges {
        let c = (0..group.num_columns()).find(|c| contains(&chunk(group, *c), range))?;
        if !columns.contains(&c) {
            columns.push(c);
        }
    }
    columns.sort_unstable();
    Some((row_group, columns))
}

fn contains(outer: &Range<u64>, inner: &Range<u64>) -> bool {
    outer.start <= inner.start && inner.end <= outer.end
}

/// Each of `ranges` as a slice of the fetched `chunks`; None if one is not within them.
fn slices(chunks: &[Range<u64>], bytes: &[Bytes], ranges: &[Range<u64>]) -> Option<Vec<Bytes>> {
    ranges
        .iter()
        .map(|range| {
            let i = chunks.iter().position(|c| contains(c, range))?;
            let start = usize::try_from(range.start - chunks[i].start).ok()?;
            let end = usize::try_from(range.end - chunks[i].start).ok()?;
            (end <= bytes.get(i)?.len()).then(|| bytes[i].slice(start..end))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    use datafusion::arrow::array::{Int64Array, RecordBatch, StringArray};
    use datafusion::arrow::datatypes::{DataType, Field, Schema};
    use parquet::arrow::ArrowWriter;
    use parquet::file::properties::WriterProperties;
    use parquet::file::reader::{FileReader, SerializedFileReader};

    /// A Parquet file of four row groups of two columns.
    fn file() -> (Bytes, Arc<ParquetMetaData>) {
        let schema = Arc::new(Schema::new(vec![
            Field::new("a", DataType::Int64, false),
            Field::new("b", DataType::Utf8, false),
        ]));
        let properties = WriterProperties::builder()
            .set_max_row_group_row_count(Some(100))
            .build();
        let mut out = Vec::new();
        let mut writer = ArrowWriter::try_new(&mut out, schema.clone(), Some(properties))
            .expect("a writer of the test file");
        let batch = RecordBatch::try_new(
            schema,
            vec![
                Arc::new(Int64Array::from_iter_values(0..400)),
                Arc::new(StringArray::from_iter_values(
                    (0..400).map(|i| format!("row {i}")),
                )),
            ],
        )
        .expect("the test batch");
        writer.write(&batch).expect("the test rows");
        writer.close().expect("the test file");
        let bytes = Bytes::from(out);
        let reader = SerializedFileReader::new(bytes.clone()).expect("the test file's footer");
        let metadata = Arc::new(reader.metadata().clone());
        (bytes, metadata)
    }

    #[test]
    fn ranges_are_placed_in_their_row_group_and_columns() {
        let (_, metadata) = file();
        assert_eq!(metadata.num_row_groups(), 4);
        let g2 = metadata.row_group(2);
        let b = chunk(g2, 1);
        assert_eq!(
            columns_of(&metadata, std::slice::from_ref(&b)),
            Some((2, vec![1]))
        );
        // Some pages of a chunk, and both chunks.
        let part = b.start + 1..b.end - 1;
        assert_eq!(columns_of(&metadata, &[part]), Some((2, vec![1])));
        assert_eq!(
            columns_of(&metadata, &[b, chunk(g2, 0)]),
            Some((2, vec![0, 1]))
        );
        // Chunks of two row groups: not one row group's.
        let mixed = [chunk(g2, 0), chunk(metadata.row_group(3), 0)];
        assert_eq!(columns_of(&metadata, &mixed), None);
        assert_eq!(columns_of(&metadata, &[]), None);
    }

    #[test]
    fn requests_are_answered_from_whole_chunks_or_not_at_all() {
        let (bytes, metadata) = file();
        let g1 = metadata.row_group(1);
        let chunks = vec![chunk(g1, 0), chunk(g1, 1)];
        let fetched: Vec<Bytes> = chunks
            .iter()
            .map(|c| bytes.slice(c.start as usize..c.end as usize))
            .collect();
        let inside = chunks[1].start + 2..chunks[1].start + 9;
        let got = slices(&chunks, &fetched, &[chunks[0].clone(), inside.clone()]);
        assert_eq!(
            got,
            Some(vec![
                fetched[0].clone(),
                bytes.slice(inside.start as usize..inside.end as usize)
            ])
        );
        let outside = chunks[1].end..chunks[1].end + 1;
        assert_eq!(slices(&chunks, &fetched, &[outside]), None);
    }

    #[tokio::test]
    async fn the_next_row_groups_come_from_what_was_fetched_ahead() {
        let (bytes, metadata) = file();
        let dir = std::env::temp_dir().join(format!("sqe-read-ahead-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).expect("a test directory");
        let path = dir.join("f.parquet");
        std::fs::write(&path, &bytes).expect("the test file");
        let mut store = FileIoStore::new(iceberg::io::FileIO::new_with_fs(), None);
        let object = store.add(&format!("file://{}", path.display()), bytes.len() as u64);
        let store = Arc::new(store);

        // A reader of the byte range holding row groups 1 and 2 only.
        let start = first_page(metadata.row_group(1));
        let end = first_page(metadata.row_group(3));
        let footers = Footers::default();
        let mut reader = ReadAhead::new(store.clone(), object.clone(), 0..start, footers.clone());
        reader.set_metadata(metadata.clone());
        // Another reader of the scan (of another range) knows the footer the first one read.
        let mut ahead = ReadAhead::new(store, object, start..end, footers);
        let group = |g: usize| chunk(metadata.row_group(g), 1);
        let want = |r: &Range<u64>| bytes.slice(r.start as usize..r.end as usize);

        // Nothing was fetched ahead of the first request, which sets row group 2 on its way:
        // row group 2 is this reader's, 3 is not.
        assert_eq!(ahead.read(&[group(1)]).await, None);
        assert_eq!(ahead.ahead.len(), 1);
        let pages = group(2).start + 3..group(2).end;
        assert_eq!(
            ahead.read(std::slice::from_ref(&pages)).await,
            Some(vec![want(&pages)])
        );
        assert!(ahead.ahead.is_empty());
        std::fs::remove_dir_all(&dir).expect("the test directory goes");
    }
}
