//! A bitmap of a hash join's build-side keys, tested before the join's own dynamic filter.
//!
//! When a join's table is too large for an IN list, DataFusion's dynamic filter looks each probe row
//! up in that table (`hash_lookup`): a random access into megabytes for every row the probe side's
//! scan reads, twice for a partitioned join (one table per partition). TPC-H q05 spent 238 ms of
//! work so on `lineitem`'s 6 M rows, to keep 0.9 M of them.
//!
//! [`BuildKeysExec`] sits on the join's build side and records the hash of every key that passes.
//! When every build partition has ended, the hashes become one bit each in a [`KeyBitmap`] of at
//! least 16 bits per key (a key not built passes with a chance of about 6%): 512 KiB for q05's
//! 227 K orders, which stays in a core's cache. The `DynamicFilterExec` over the probe side's scan
//! tests each row's keys there first, and evaluates the join's own filter only on the rows that
//! pass, so it keeps the rows it kept before. A bitmap that keeps nearly every row it tests (a join
//! that matches nearly every row) is dropped after a trial, with its join's filter: a lookup in a
//! table of megabytes costs a cache miss a row, for nothing, and the join checks every row anyway.
//!
//! The bitmap is only a pre-filter: until it is ready, or where it is given up (more keys than
//! [`MOST_KEYS`], memory refused, key types that differ between the sides, a partition run twice),
//! the join's filter runs alone, as before. Rows with a NULL key always pass it.

use std::fmt;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::task::{Context, Poll};

use datafusion::arrow::array::{Array, ArrayRef, BooleanArray, RecordBatch};
use datafusion::arrow::buffer::BooleanBuffer;
use datafusion::arrow::datatypes::{DataType, SchemaRef};
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

use super::dynamic_filter::only_input;

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

/// The build side's key hashes while they are collected, then their bitmap.
#[derive(Debug)]
pub(crate) struct KeyBitmap {
    building: Mutex<Building>,
    ready: OnceLock<Bits>,
    /// Given up: no bitmap now, or ever again (even one already made).
    withdrawn: AtomicBool,
}

#[derive(Debug, Default)]
struct Building {
    hashes: Vec<u64>,
    types: Option<Vec<DataType>>,
    finished: Vec<bool>,
    /// Holds the memory of `hashes` (its capacity) against the query's pool.
    reservation: Option<MemoryReservation>,
}

#[derive(Debug)]
struct Bits {
    words: Vec<u64>,
    /// How far a hash's product is shifted right to give a bit's index.
    shift: u32,
    types: Vec<DataType>,
    _reservation: MemoryReservation,
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
        building.reservation = None;
    }

    /// Records the hashes of one build batch's keys.
    fn add(&self, keys: &[ArrayRef], pool: &Arc<dyn MemoryPool>) {
        if keys.is_empty() || self.withdrawn() {
            return;
        }
        let types: Vec<DataType> = keys.iter().map(|k| k.data_type().clone()).collect();
        let state = RandomState::with_seed(SEED);
        let recorded = with_hashes(keys, &state, |hashes| {
            let mut building = self.building();
            if self.withdrawn() {
                return Ok(());
            }
            if building.types.get_or_insert_with(|| types.clone()) != &types
                || building.hashes.len() + hashes.len() > MOST_KEYS
            {
                self.give_up(&mut building);
                return Ok(());
            }
            building.hashes.extend_from_slice(hashes);
            let bytes = building.hashes.capacity() * 8;
            let reservation = building
                .reservation
                .get_or_insert_with(|| MemoryConsumer::new("BuildKeysExec").register(pool));
            if reservation.try_resize(bytes).is_err() {
                self.give_up(&mut building);
            }
            Ok(())
        });
        if recorded.is_err() {
            self.give_up(&mut self.building());
        }
    }

    /// Marks a build partition as ended; the last one turns the hashes into the bitmap.
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
        let (Some(types), Some(reservation)) = (building.types.take(), building.reservation.take())
        else {
            // No build rows at all: the join's own filter keeps nothing already.
            return;
        };
        let bits = (hashes.len() * BITS_PER_KEY)
            .next_power_of_two()
            .clamp(4096, MOST_BITS);
        let words = bits / 64;
        if reservation.try_grow(words * 8).is_err() {
            self.give_up(&mut building);
            return;
        }
        let shift = 64 - bits.trailing_zeros();
        let mut map = vec![0u64; words];
        for h in &hashes {
            let bit = index(*h, shift);
            map[bit / 64] |= 1 << (bit % 64);
        }
        drop(hashes);
        reservation.resize(words * 8);
        let _ = self.ready.set(Bits {
            words: map,
            shift,
            types,
            _reservation: reservation,
        });
    }

    /// Records that a build partition failed to give its keys: no bitmap.
    fn abandon(&self) {
        self.give_up(&mut self.building());
    }

    /// The bitmap's size in bytes; None while it is not ready.
    pub(crate) fn size(&self) -> Option<usize> {
        self.ready.get().map(|bits| bits.words.len() * 8)
    }

    /// Whether each row's keys may be among the built ones (None while the bitmap is not ready, or
    /// for keys of other types than the built ones). A row with a NULL key passes.
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
        let state = RandomState::with_seed(SEED);
        let found = with_hashes(keys, &state, |hashes| {
            Ok(BooleanBuffer::collect_bool(hashes.len(), |row| {
                let bit = index(hashes[row], bits.shift);
                bits.words[bit / 64] & (1 << (bit % 64)) != 0
            }))
        })?;
        let found = keys
            .iter()
            .filter_map(|k| k.logical_nulls())
            .fold(found, |found, nulls| &found | &!nulls.inner());
        Ok(Some(BooleanArray::new(found, None)))
    }
}

/// A hash's bit: its top bits after a multiplication that mixes every bit into them.
fn index(hash: u64, shift: u32) -> usize {
    (hash.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> shift) as usize
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
    use datafusion::arrow::array::{Int64Array, StringArray};
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
    fn every_built_key_passes_and_most_others_do_not() {
        let bitmap = KeyBitmap::new(2);
        let pool = pool();
        let evens: Vec<Option<i64>> = (0..20_000).map(|k| Some(k * 2)).collect();
        bitmap.add(&[ints(&evens[..10_000])], &pool);
        bitmap.finish(0);
        assert!(
            mask(&bitmap, &[ints(&evens)]).is_none(),
            "one partition to go"
        );
        bitmap.add(&[ints(&evens[10_000..])], &pool);
        bitmap.finish(1);

        assert_eq!(ready(&bitmap, &[ints(&evens)]).true_count(), 20_000);
        let odds: Vec<Option<i64>> = (0..20_000).map(|k| Some(k * 2 + 1)).collect();
        // At least 16 bits a key: about 6% of the keys not built pass.
        let others = ready(&bitmap, &[ints(&odds)]).true_count();
        assert!(others < 2_000, "{others}");

        let nulls = ready(&bitmap, &[ints(&[None, Some(1), None])]);
        assert!(nulls.value(0) && nulls.value(2));
        let strings: ArrayRef = Arc::new(StringArray::from(vec!["0"]));
        assert!(mask(&bitmap, &[strings]).is_none(), "keys of another type");
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
