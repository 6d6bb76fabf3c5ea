//! How much of a batch fits in a protocol's answer: every protocol that sends rows in pieces
//! bounds a piece by bytes as well as rows, so that wide rows come in smaller pieces.

use arrow_array::{Array, RecordBatch};

/// How many of `batch`'s first rows fit in `room` bytes (as Arrow holds them) and `rows` rows,
/// one at least, and their bytes.
pub fn rows_within(batch: &RecordBatch, room: usize, rows: usize) -> (usize, usize) {
    let bytes = |n: usize| {
        batch
            .slice(0, n)
            .columns()
            .iter()
            .map(|c| c.to_data().get_slice_memory_size().unwrap_or(room))
            .fold(0usize, usize::saturating_add)
    };
    let mut take = batch.num_rows().min(rows.max(1));
    let mut size = bytes(take);
    while take > 1 && size > room {
        take /= 2;
        size = bytes(take);
    }
    (take, size)
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::{Int64Array, StringArray};
    use std::sync::Arc;

    #[test]
    fn wide_rows_fit_fewer_at_a_time() {
        let text = "x".repeat(1000);
        let batch = RecordBatch::try_from_iter([
            ("n", Arc::new(Int64Array::from_iter_values(0..100)) as _),
            (
                "s",
                Arc::new(StringArray::from_iter_values((0..100).map(|_| &text))) as _,
            ),
        ])
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(rows_within(&batch, usize::MAX, 2048).0, 100);
        assert_eq!(rows_within(&batch, usize::MAX, 40).0, 40);
        let (take, size) = rows_within(&batch, 30_000, 2048);
        assert!(take < 30 && size <= 30_000, "{take} rows, {size} bytes");
        // One row always goes, however wide.
        assert_eq!(rows_within(&batch, 10, 2048).0, 1);
    }
}
