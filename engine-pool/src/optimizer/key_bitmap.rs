//! A bitmap of a hash join's build-side keys, tested before the join's own dynamic filter.
//!
//! When a join's table is too large for an IN list, DataFusion's dynamic filter looks each probe row
//! up in that table (`hash_lookup`): a random access into megabytes for every row the probe side's
//! scan reads, twice for a partitioned join (one table per partition). TPC-H q05 spent 238 ms of
//! work so on `lineitem`'s 6 M rows, to keep 0.9 M of them.
//!
//! [`BuildKeysExec`] sits on the join's build side and records every key that passes. When every
//! build partition has ended, the keys become one bit each in a [`KeyBitmap`]:
//! - an **exact** bitmap where the join has one integer key whose built values span at most
//!   [`MOST_BITS`]: a bit for each value from the smallest to the largest, so a row passes exactly
//!   when the join has its key, found without hashing (750 KiB for q05's 227 K orders among 6 M
//!   order keys; `lineitem` arrives sorted by its order key, so the test reads the bitmap in turn);
//! - otherwise one bit per key's hash, at least 16 bits per key (a key not built passes with a
//!   chance of about 6%): 512 KiB for 227 K keys, which stays in a core's cache.
//!
//! The `DynamicFilterExec` over the probe side's scan tests each row's keys there first, and
//! evaluates the join's own filter only on the rows that pass, so it keeps the rows it kept
//! before; after an exact bitmap it does not evaluate the join's filter at all (it would keep
//! every row the bitmap kept). TPC-H q05's filter over `lineitem`: 173 ms of work with a bitmap of
//! hashes and the join's table lookups behind it, 11 ms with an exact bitmap alone. A bitmap that
//! keeps nearly every row it tests (a join that matches nearly every row) is dropped after a
//! trial, with its join's filter: a lookup in a table of megabytes costs a cache miss a row, for
//! nothing, and the join checks every row anyway.
//!
//! The bitmap is a pre-filter (an exact one stands in for the join's filter): until it is ready, or
//! where it is given up (more keys than [`MOST_KEYS`], memory refused, key types that differ
//! between the sides, a partition run twice), the join's filter runs alone, as before. Rows with a
//! NULL key always pass it (the join drops them).

use std::borrow::Cow;
use std::fmt;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::task::{Context, Poll};

use datafusion::arrow::array::AsArray;
use datafusion::arrow::array::{Array, ArrayRef, BooleanArray, Int64Array, RecordBatch};
use datafusion::arrow::buffer::BooleanBuffer;
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{
    DataType, Date32Type, Int8Type, Int16Type, Int32Type, Int64Type, SchemaRef, UInt8Type,
    UInt16Type, UInt32Type,
};
use datafusion::common::hash_utils::{RandomState, with_hashes};
use datafusion::common::{Result as DFResult, Statistics};
use datafusion::execution::memory_pool::{MemoryConsumer, MemoryPool, MemoryReservation};
use datafusion::execution::{RecordBatchStream, SendableRecordBatchStream, TaskContext};
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_plan::metrics::{
    BaselineMetrics, Count, ExecutionPlanMetricsSet, MetricBuilder, MetricsSet,
};
use datafusion::physical_plan::{DisplayAs, DisplayFormatType, ExecutionPlan, PlanProperties};
use futures::{Stream, StreamExt};

use super::exec::only_input;

/// Above this many build rows (keys, repeated or not) the bitmap is given up: in the largest
/// bitmap more than a fifth of the keys not built would pass.
pub(crate) const MOST_KEYS: usize = 1 << 21;

/// Bits per built key (rounded up to a power of two), up to [`MOST_BITS`].
const BITS_PER_KEY: usize = 16;

/// The largest bitmap: 1 MiB, a core's L2 cache here. A larger one would cost a cache miss per
/// row, as the join's own table does; past 512 K keys more keys not built pass instead (a sixth
/// at 1.5 M keys).
const MOST_BITS: usize = 1 << 23;

/// The seed of the keys' hashes (any fixed value: both sides hash with it).
const SEED: u64 = 0x5153_455f_6b65_7973;

/// The build side's keys while they are collected, then their bitmap.
#[derive(Debug)]
pub(crate) struct KeyBitmap {
    building: Mutex<Building>,
    ready: OnceLock<Bits>,
    /// Given up: no bitmap now, or ever again (even one already made).
    withdrawn: AtomicBool,
}

#[derive(Debug, Default)]
struct Building {
    /// The hashes of the keys, where the join's key is not one integer column.
    hashes: Vec<u64>,
    /// The keys but NULLs, where it is.
    integers: Vec<i64>,
    types: Option<Vec<DataType>>,
    finished: Vec<bool>,
    /// Holds the memory of `hashes` and `integers` (their capacity) against the query's pool.
    reservation: Option<MemoryReservation>,
}

impl Building {
    fn bytes(&self) -> usize {
        (self.hashes.capacity() + self.integers.capacity()) * 8
    }
}

#[derive(Debug)]
struct Bits {
    words: Vec<u64>,
    index: Index,
    types: Vec<DataType>,
    _reservation: MemoryReservation,
}

/// How a key finds its bit.
#[derive(Debug, Clone, Copy)]
enum Index {
    /// Its hash's product, shifted right this far.
    Hashed { shift: u32 },
    /// Its value less the smallest built one; `len` bits, the largest built one last.
    Exact { min: i64, len: u64 },
}

/// An exact bitmap's bit for `key`: None when it lies outside the built keys' span.
fn offset(min: i64, len: u64, key: i64) -> Option<usize> {
    let offset = key.wrapping_sub(min) as u64;
    (offset < len).then_some(offset as usize)
}

/// Whether `words` has `bit` set.
fn has(words: &[u64], bit: usize) -> bool {
    words[bit / 64] & (1 << (bit % 64)) != 0
}

/// The values of an integer array of a type an exact bitmap takes, as `i64` (borrowed for `Int64`,
/// widened otherwise), null slots included; None for any other type.
fn as_i64(array: &dyn Array) -> Option<Cow<'_, [i64]>> {
    fn widen<T: Copy + Into<i64>>(values: &[T]) -> Option<Cow<'_, [i64]>> {
        Some(Cow::Owned(values.iter().map(|v| (*v).into()).collect()))
    }
    match array.data_type() {
        DataType::Int64 => Some(Cow::Borrowed(array.as_primitive::<Int64Type>().values())),
        DataType::Int32 => widen(array.as_primitive::<Int32Type>().values()),
        DataType::Int16 => widen(array.as_primitive::<Int16Type>().values()),
        DataType::Int8 => widen(array.as_primitive::<Int8Type>().values()),
        DataType::UInt32 => widen(array.as_primitive::<UInt32Type>().values()),
        DataType::UInt16 => widen(array.as_primitive::<UInt16Type>().values()),
        DataType::UInt8 => widen(array.as_primitive::<UInt8Type>().values()),
        DataType::Date32 => widen(array.as_primitive::<Date32Type>().values()),
        _ => None,
    }
}

/// Whether a join key of this type can have an exact bitmap.
fn integer(t: &DataType) -> bool {
    use DataType::*;
    matches!(
        t,
        Int8 | Int16 | Int32 | Int64 | UInt8 | UInt16 | UInt32 | Date32
    )
}

impl KeyBitmap {
    /// A bitmap filled by `partitions` build partitions.
    pub(crate) fn new(partitions: usize) -> Self {
        Self {
            building: Mutex::new(Building {
                finished: vec![false; partitions],
                ..Building::default()
            }),
            ready: OnceLock::new(),
            withdrawn: AtomicBool::new(false),
        }
    }

    /// Whether the bitmap has been given up, for good.
    pub(crate) fn withdrawn(&self) -> bool {
        self.withdrawn.load(Ordering::Acquire)
    }

    fn building(&self) -> std::sync::MutexGuard<'_, Building> {
        self.building.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Gives the bitmap up, and frees what it collected.
    fn give_up(&self, building: &mut Building) {
        self.withdrawn.store(true, Ordering::Release);
        building.hashes = Vec::new();
        building.integers = Vec::new();
        building.reservation = None;
    }

    /// Records one build batch's keys: their values where the join has one integer key, their
    /// hashes otherwise.
    fn add(&self, keys: &[ArrayRef], pool: &Arc<dyn MemoryPool>) {
        if keys.is_empty() || self.withdrawn() {
            return;
        }
        let types: Vec<DataType> = keys.iter().map(|k| k.data_type().clone()).collect();
        if let [key] = keys
            && integer(key.data_type())
        {
            let integers = integers_of(key.as_ref());
            self.record(&types, integers.len(), pool, |b| {
                b.integers.extend_from_slice(&integers)
            });
            return;
        }
        let state = RandomState::with_seed(SEED);
        let recorded = with_hashes(keys, &state, |hashes| {
            self.record(&types, hashes.len(), pool, |b| {
                b.hashes.extend_from_slice(hashes)
            });
            Ok(())
        });
        if recorded.is_err() {
            self.give_up(&mut self.building());
        }
    }

    /// Adds `count` keys of `types` with `extend`, unless that makes too many keys, or keys of
    /// other types than before, or more memory than the pool grants: then gives the bitmap up.
    fn record(
        &self,
        types: &[DataType],
        count: usize,
        pool: &Arc<dyn MemoryPool>,
        extend: impl FnOnce(&mut Building),
    ) {
        let mut building = self.building();
        if self.withdrawn() {
            return;
        }
        if building.types.get_or_insert_with(|| types.to_vec()) != types
            || building.hashes.len() + building.integers.len() + count > MOST_KEYS
        {
            self.give_up(&mut building);
            return;
        }
        extend(&mut building);
        let bytes = building.bytes();
        let reservation = building
            .reservation
            .get_or_insert_with(|| MemoryConsumer::new("BuildKeysExec").register(pool));
        if reservation.try_resize(bytes).is_err() {
            self.give_up(&mut building);
        }
    }

    /// Marks a build partition as ended; the last one turns the keys into the bitmap.
    fn finish(&self, partition: usize) {
        let mut building = self.building();
        match building.finished.get_mut(partition) {
            Some(done) if !*done => *done = true,
            // A partition run twice would mix two runs' keys.
            _ => {
                self.give_up(&mut building);
                return;
            }
        }
        if self.withdrawn() || building.finished.iter().any(|done| !done) {
            return;
        }
        let hashes = std::mem::take(&mut building.hashes);
        let integers = std::mem::take(&mut building.integers);
        let (Some(types), Some(reservation)) = (building.types.take(), building.reservation.take())
        else {
            // No build rows at all: the join's own filter keeps nothing already.
            return;
        };
        let one_integer = matches!(types.as_slice(), [t] if integer(t));
        let exact = one_integer
            .then(|| span(&integers))
            .filter(|(_, len)| *len <= MOST_BITS as u64);
        let hashes = match (exact, one_integer) {
            (None, true) => match hashes_of(&integers, &types[0]) {
                Ok(hashes) => hashes,
                Err(_) => {
                    self.give_up(&mut building);
                    return;
                }
            },
            _ => hashes,
        };
        let (bits, index) = match exact {
            Some((min, len)) => (len as usize, Index::Exact { min, len }),
            None => {
                let bits = (hashes.len() * BITS_PER_KEY)
                    .next_power_of_two()
                    .clamp(4096, MOST_BITS);
                let shift = 64 - bits.trailing_zeros();
                (bits, Index::Hashed { shift })
            }
        };
        let words = bits.div_ceil(64).max(1);
        if reservation.try_grow(words * 8).is_err() {
            self.give_up(&mut building);
            return;
        }
        let mut map = vec![0u64; words];
        let mut set = |bit: usize| map[bit / 64] |= 1 << (bit % 64);
        match index {
            Index::Exact { min, .. } => {
                for v in &integers {
                    set(v.wrapping_sub(min) as usize);
                }
            }
            Index::Hashed { shift } => {
                for h in &hashes {
                    set(hashed(*h, shift));
                }
            }
        }
        drop((hashes, integers));
        reservation.resize(words * 8);
        let _ = self.ready.set(Bits {
            words: map,
            index,
            types,
            _reservation: reservation,
        });
    }

    /// Records that a build partition failed to give its keys: no bitmap.
    fn abandon(&self) {
        self.give_up(&mut self.building());
    }

    /// Whether the bitmap is ready and exact: a row passes it exactly when the join has its key.
    pub(crate) fn exact(&self) -> bool {
        !self.withdrawn()
            && self
                .ready
                .get()
                .is_some_and(|bits| matches!(bits.index, Index::Exact { .. }))
    }

    /// The bitmap's size in bytes; None while it is not ready.
    pub(crate) fn size(&self) -> Option<usize> {
        self.ready.get().map(|bits| bits.words.len() * 8)
    }

    /// Whether each row's keys may be among the built ones, or are, for an exact bitmap (None while
    /// the bitmap is not ready, or for keys of other types than the built ones). A row with a NULL
    /// key passes.
    pub(crate) fn mask(&self, keys: &[ArrayRef]) -> DFResult<Option<BooleanArray>> {
        let Some(bits) = self.ready.get().filter(|_| !self.withdrawn()) else {
            return Ok(None);
        };
        if keys.is_empty() {
            return Ok(None);
        }
        if keys.len() != bits.types.len()
            || keys
                .iter()
                .zip(&bits.types)
                .any(|(k, t)| k.data_type() != t)
        {
            return Ok(None);
        }
        let found = match bits.index {
            Index::Exact { min, len } => {
                let Some(values) = as_i64(keys[0].as_ref()) else {
                    return Ok(None);
                };
                BooleanBuffer::collect_bool(values.len(), |row| {
                    offset(min, len, values[row]).is_some_and(|bit| has(&bits.words, bit))
                })
            }
            Index::Hashed { shift } => {
                let state = RandomState::with_seed(SEED);
                with_hashes(keys, &state, |hashes| {
                    Ok(BooleanBuffer::collect_bool(hashes.len(), |row| {
                        has(&bits.words, hashed(hashes[row], shift))
                    }))
                })?
            }
        };
        let found = keys
            .iter()
            .filter_map(|k| k.logical_nulls())
            .fold(found, |found, nulls| &found | &!nulls.inner());
        Ok(Some(BooleanArray::new(found, None)))
    }
}

/// A hash's bit: its top bits after a multiplication that mixes every bit into them.
fn hashed(hash: u64, shift: u32) -> usize {
    (hash.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> shift) as usize
}

/// The values of an integer key column but its NULLs, as `i64`.
fn integers_of(key: &dyn Array) -> Vec<i64> {
    let Some(values) = as_i64(key) else {
        return Vec::new();
    };
    match key.logical_nulls() {
        None => values.into_owned(),
        Some(valid) => valid.valid_indices().map(|row| values[row]).collect(),
    }
}

/// The smallest of `values`, and how many values lie from it to the largest (0 for none).
fn span(values: &[i64]) -> (i64, u64) {
    let (Some(min), Some(max)) = (values.iter().min(), values.iter().max()) else {
        return (0, 0);
    };
    let len = i128::from(*max) - i128::from(*min) + 1;
    (*min, u64::try_from(len).unwrap_or(u64::MAX))
}

/// The hashes of integer keys recorded as `i64`, as their own type hashes them (as the probe
/// side's keys are hashed).
fn hashes_of(values: &[i64], t: &DataType) -> DFResult<Vec<u64>> {
    let array: ArrayRef = Arc::new(Int64Array::from(values.to_vec()));
    let keys = [cast(&array, t)?];
    let state = RandomState::with_seed(SEED);
    with_hashes(&keys, &state, |hashes| Ok(hashes.to_vec()))
}

/// Passes its input on, recording the hashes of its rows' join keys in a [`KeyBitmap`].
#[derive(Debug)]
pub(crate) struct BuildKeysExec {
    input: Arc<dyn ExecutionPlan>,
    keys: Vec<Arc<dyn PhysicalExpr>>,
    bitmap: Arc<KeyBitmap>,
    metrics: ExecutionPlanMetricsSet,
}

impl BuildKeysExec {
    pub(crate) fn new(
        input: Arc<dyn ExecutionPlan>,
        keys: Vec<Arc<dyn PhysicalExpr>>,
        bitmap: Arc<KeyBitmap>,
    ) -> Self {
        Self {
            input,
            keys,
            bitmap,
            metrics: ExecutionPlanMetricsSet::new(),
        }
    }
}

impl DisplayAs for BuildKeysExec {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let keys: Vec<String> = self.keys.iter().map(|k| k.to_string()).collect();
        write!(f, "BuildKeysExec: keys=[{}]", keys.join(", "))
    }
}

impl ExecutionPlan for BuildKeysExec {
    fn name(&self) -> &str {
        "BuildKeysExec"
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        self.input.properties()
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        vec![&self.input]
    }

    fn with_new_children(
        self: Arc<Self>,
        children: Vec<Arc<dyn ExecutionPlan>>,
    ) -> DFResult<Arc<dyn ExecutionPlan>> {
        let input = only_input(children, self.name())?;
        Ok(Arc::new(Self::new(
            input,
            self.keys.clone(),
            Arc::clone(&self.bitmap),
        )))
    }

    /// A plan run again (a recursive query's next round) would add its keys to this run's: the node
    /// leaves the plan, as the probe side's `DynamicFilterExec` does.
    fn reset_state(self: Arc<Self>) -> DFResult<Arc<dyn ExecutionPlan>> {
        Ok(Arc::clone(&self.input))
    }

    fn maintains_input_order(&self) -> Vec<bool> {
        vec![true]
    }

    fn partition_statistics(&self, partition: Option<usize>) -> DFResult<Arc<Statistics>> {
        self.input.partition_statistics(partition)
    }

    fn metrics(&self) -> Option<MetricsSet> {
        Some(self.metrics.clone_inner())
    }

    fn execute(
        &self,
        partition: usize,
        context: Arc<TaskContext>,
    ) -> DFResult<SendableRecordBatchStream> {
        Ok(Box::pin(RecordKeys {
            input: self.input.execute(partition, Arc::clone(&context))?,
            keys: self.keys.clone(),
            bitmap: Arc::clone(&self.bitmap),
            pool: Arc::clone(context.memory_pool()),
            partition,
            baseline: BaselineMetrics::new(&self.metrics, partition),
            recorded: MetricBuilder::new(&self.metrics).counter("keys_recorded", partition),
        }))
    }
}

/// One build partition's stream: its batches, their keys recorded on the way.
struct RecordKeys {
    input: SendableRecordBatchStream,
    keys: Vec<Arc<dyn PhysicalExpr>>,
    bitmap: Arc<KeyBitmap>,
    pool: Arc<dyn MemoryPool>,
    partition: usize,
    baseline: BaselineMetrics,
    recorded: Count,
}

impl Stream for RecordKeys {
    type Item = DFResult<RecordBatch>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = &mut *self;
        let polled = this.input.poll_next_unpin(cx);
        let timer = this.baseline.elapsed_compute().timer();
        match &polled {
            Poll::Ready(Some(Ok(batch))) if !this.bitmap.withdrawn() => {
                let rows = batch.num_rows();
                let keys: DFResult<Vec<ArrayRef>> = this
                    .keys
                    .iter()
                    .map(|k| k.evaluate(batch)?.into_array(rows))
                    .collect();
                match keys {
                    Ok(keys) => this.bitmap.add(&keys, &this.pool),
                    Err(_) => this.bitmap.abandon(),
                }
                this.recorded.add(rows);
            }
            Poll::Ready(None) => this.bitmap.finish(this.partition),
            _ => {}
        }
        timer.done();
        this.baseline.record_poll(polled)
    }
}

impl RecordBatchStream for RecordKeys {
    fn schema(&self) -> SchemaRef {
        self.input.schema()
    }
}

#[cfg(test)]
mod tests {
    use datafusion::arrow::array::{Date32Array, Int32Array, StringArray, UInt32Array};
    use datafusion::execution::memory_pool::{GreedyMemoryPool, UnboundedMemoryPool};

    use super::*;

    fn pool() -> Arc<dyn MemoryPool> {
        Arc::new(UnboundedMemoryPool::default())
    }

    fn ints(values: &[Option<i64>]) -> ArrayRef {
        Arc::new(Int64Array::from(values.to_vec()))
    }

    fn mask(bitmap: &KeyBitmap, keys: &[ArrayRef]) -> Option<BooleanArray> {
        bitmap.mask(keys).unwrap_or_else(|e| panic!("{e}"))
    }

    fn ready(bitmap: &KeyBitmap, keys: &[ArrayRef]) -> BooleanArray {
        mask(bitmap, keys).unwrap_or_else(|| panic!("the bitmap is not ready"))
    }

    #[test]
    fn one_integer_key_of_narrow_span_gets_an_exact_bitmap() {
        let bitmap = KeyBitmap::new(2);
        let pool = pool();
        let evens: Vec<Option<i64>> = (0..20_000).map(|k| Some(1_000 + k * 2)).collect();
        bitmap.add(&[ints(&evens[..10_000])], &pool);
        bitmap.finish(0);
        assert!(
            mask(&bitmap, &[ints(&evens)]).is_none(),
            "one partition to go"
        );
        bitmap.add(&[ints(&[None])], &pool);
        bitmap.add(&[ints(&evens[10_000..])], &pool);
        bitmap.finish(1);
        assert!(bitmap.exact());

        assert_eq!(ready(&bitmap, &[ints(&evens)]).true_count(), 20_000);
        let odds: Vec<Option<i64>> = (0..20_000).map(|k| Some(1_001 + k * 2)).collect();
        assert_eq!(ready(&bitmap, &[ints(&odds)]).true_count(), 0);
        // Outside the built keys' span, on either side, and NULLs (which pass).
        let edges = [
            Some(i64::MIN),
            Some(998),
            Some(1_000),
            None,
            Some(40_998),
            Some(41_000),
        ];
        let found = ready(&bitmap, &[ints(&edges)]);
        let found: Vec<bool> = found.iter().map(|b| b == Some(true)).collect();
        assert_eq!(found, [false, false, true, true, true, false]);
        let strings: ArrayRef = Arc::new(StringArray::from(vec!["1000"]));
        assert!(mask(&bitmap, &[strings]).is_none(), "keys of another type");
    }

    #[test]
    fn narrower_integer_types_and_dates_get_exact_bitmaps() {
        let pool = pool();
        let cases: [(ArrayRef, ArrayRef); 3] = [
            (
                Arc::new(Int32Array::from(vec![Some(-5), None, Some(3)])),
                Arc::new(Int32Array::from(vec![-6, -5, -4, 3, 4])),
            ),
            (
                Arc::new(UInt32Array::from(vec![u32::MAX - 2, u32::MAX])),
                Arc::new(UInt32Array::from(vec![
                    0,
                    u32::MAX - 2,
                    u32::MAX - 1,
                    u32::MAX,
                ])),
            ),
            (
                Arc::new(Date32Array::from(vec![19_000, 19_002])),
                Arc::new(Date32Array::from(vec![19_000, 19_001, 19_002])),
            ),
        ];
        let expected: [&[bool]; 3] = [
            &[false, true, false, true, false],
            &[false, true, false, true],
            &[true, false, true],
        ];
        for ((built, probed), expected) in cases.into_iter().zip(expected) {
            let bitmap = KeyBitmap::new(1);
            bitmap.add(&[built], &pool);
            bitmap.finish(0);
            assert!(bitmap.exact(), "{probed:?}");
            let found = ready(&bitmap, &[probed]);
            let found: Vec<bool> = found.iter().map(|b| b == Some(true)).collect();
            assert_eq!(found, expected);
        }

        // Only NULL keys built: no other key can join.
        let nulls = KeyBitmap::new(1);
        nulls.add(&[ints(&[None, None])], &pool);
        nulls.finish(0);
        let found = ready(&nulls, &[ints(&[Some(0), None])]);
        assert_eq!(found.iter().collect::<Vec<_>>(), [Some(false), Some(true)]);
    }

    #[test]
    fn wide_spans_and_other_keys_get_a_bitmap_of_hashes() {
        let pool = pool();
        let spread: Vec<Option<i64>> = (0..20_000).map(|k| Some(k * 1_000)).collect();
        let others: Vec<Option<i64>> = (0..20_000).map(|k| Some(k * 1_000 + 1)).collect();
        let strings = |keys: &[Option<i64>]| -> ArrayRef {
            let keys: Vec<String> = keys.iter().flatten().map(|k| k.to_string()).collect();
            Arc::new(StringArray::from(keys))
        };
        let cases: [(Vec<ArrayRef>, Vec<ArrayRef>); 3] = [
            (vec![ints(&spread)], vec![ints(&others)]),
            (vec![strings(&spread)], vec![strings(&others)]),
            (
                vec![ints(&spread), ints(&spread)],
                vec![ints(&spread), ints(&others)],
            ),
        ];
        for (built, probed) in cases {
            let bitmap = KeyBitmap::new(1);
            bitmap.add(&built, &pool);
            bitmap.finish(0);
            assert!(!bitmap.exact());
            assert_eq!(ready(&bitmap, &built).true_count(), 20_000);
            // At least 16 bits a key: about 6% of the keys not built pass.
            let passed = ready(&bitmap, &probed).true_count();
            assert!(passed < 2_000, "{passed}");
        }

        // The span of the widest keys does not fit in 64 bits.
        let extremes = KeyBitmap::new(1);
        extremes.add(&[ints(&[Some(i64::MIN), Some(i64::MAX)])], &pool);
        extremes.finish(0);
        assert!(!extremes.exact());
        let found = ready(&extremes, &[ints(&[Some(i64::MIN), Some(i64::MAX)])]);
        assert_eq!(found.true_count(), 2);
    }

    #[test]
    fn a_partition_run_twice_or_too_many_keys_give_it_up() {
        let pool = pool();
        let twice = KeyBitmap::new(2);
        twice.add(&[ints(&[Some(1)])], &pool);
        twice.finish(0);
        twice.finish(0);
        twice.finish(1);
        assert!(mask(&twice, &[ints(&[Some(1)])]).is_none());

        // Run again once the bitmap is made: it is withdrawn.
        let again = KeyBitmap::new(1);
        again.add(&[ints(&[Some(1)])], &pool);
        again.finish(0);
        assert_eq!(ready(&again, &[ints(&[Some(1)])]).true_count(), 1);
        again.add(&[ints(&[Some(2)])], &pool);
        again.finish(0);
        assert!(again.withdrawn());
        assert!(mask(&again, &[ints(&[Some(1)])]).is_none());

        let many = KeyBitmap::new(1);
        let keys: Vec<Option<i64>> = (0..MOST_KEYS as i64 / 2 + 1).map(Some).collect();
        many.add(&[ints(&keys)], &pool);
        many.add(&[ints(&keys)], &pool);
        many.finish(0);
        assert!(mask(&many, &[ints(&[Some(1)])]).is_none());
    }

    /// A plan run again (a recursive query's next round) leaves the node out.
    #[test]
    fn a_reset_plan_leaves_the_node_out() {
        use datafusion::arrow::datatypes::{Field, Schema};
        use datafusion::physical_expr::expressions::col;
        use datafusion::physical_plan::empty::EmptyExec;

        let schema = Arc::new(Schema::new(vec![Field::new("k", DataType::Int64, true)]));
        let input: Arc<dyn ExecutionPlan> = Arc::new(EmptyExec::new(Arc::clone(&schema)));
        let key = col("k", &schema).unwrap_or_else(|e| panic!("{e}"));
        let node = Arc::new(BuildKeysExec::new(
            Arc::clone(&input),
            vec![key],
            Arc::new(KeyBitmap::new(1)),
        ));
        let reset = node.reset_state().unwrap_or_else(|e| panic!("{e}"));
        assert!(Arc::ptr_eq(&reset, &input));
    }

    #[test]
    fn refused_memory_gives_it_up() {
        let small: Arc<dyn MemoryPool> = Arc::new(GreedyMemoryPool::new(1024));
        let bitmap = KeyBitmap::new(1);
        let keys: Vec<Option<i64>> = (0..1000).map(Some).collect();
        bitmap.add(&[ints(&keys)], &small);
        bitmap.finish(0);
        assert!(mask(&bitmap, &[ints(&[Some(1)])]).is_none());
    }
}
