//! Running sums, counts, minima and maxima in one pass over sorted rows.
//!
//! `sum(x) OVER (PARTITION BY k ORDER BY d ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)`, and
//! the same frame by RANGE or GROUPS (an ORDER BY's default frame), is a running total. DataFusion
//! 54.1 computes it row by row: for each row it slices the row off its batch, hands the slice to
//! the aggregate's accumulator and reads the accumulator's value out as a `ScalarValue`, and it
//! keeps each partition key's rows apart in a map. [`RunningWindowExec`] takes the place of a
//! window exec whose every function is such a running `sum`, `count`, `min` or `max` of a type it
//! knows: it walks each batch once, carries each function's value from row to row and from batch
//! to batch, and starts again where the partition key changes. Rows that tie on the ORDER BY (in a
//! RANGE or GROUPS frame) all get the value of the last of them, so a batch's last run of ties
//! waits for the next batch, which may continue it.
//!
//! The functions give DataFusion's answers: NULLs are skipped, a partition's value is NULL until
//! its first value that is not (a count's is 0), and a run of ties is added up first and then
//! added to the running value, as DataFusion hands it to the accumulator at once (which decides
//! the last bits of a double's sum, and whether a bigint sum that leaves the range within the run
//! fails: SQE's sum fails with Trino's message when what it adds up leaves bigint). A decimal sum
//! that would wrap around its 128 bits fails, where DataFusion's wraps. Floating-point minima and
//! maxima (where NaN has to be ordered), DISTINCT, FILTER and every other function or frame stay
//! DataFusion's.
//!
//! What it wins on DataFusion 54.1: TPC-DS q51, whose three running windows take 1.25 M rows,
//! 0.29 s against 0.58 s without it (DuckDB 1.5.5: 0.39 s); the windows' own work went from 600 ms
//! to 25 ms (`sqe-bench --set sqe.optimizer.running_windows=false`, 2026-12-07; BENCHMARKS.md).

use std::fmt;
use std::iter;
use std::ops::Range;
use std::sync::Arc;

use datafusion::arrow::array::{
    Array, ArrayRef, ArrowPrimitiveType, AsArray, Decimal128Array, Float64Array, Int64Array,
    PrimitiveArray, PrimitiveBuilder, RecordBatch,
};
use datafusion::arrow::compute::{concat_batches, partition, sum};
use datafusion::arrow::datatypes::{
    DataType, Date32Type, Date64Type, Decimal128Type, Float64Type, Int8Type, Int16Type, Int32Type,
    Int64Type, SchemaRef, TimeUnit, TimestampMicrosecondType, TimestampMillisecondType,
    TimestampNanosecondType, TimestampSecondType, UInt8Type, UInt16Type, UInt32Type, UInt64Type,
};
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::{Transformed, TransformedResult, TreeNode};
use datafusion::common::{DataFusionError, Result as DFResult, ScalarValue, Statistics};
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::logical_expr::{WindowFrameBound, WindowFrameUnits};
use datafusion::physical_expr::OrderingRequirements;
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_expr::window::{PlainAggregateWindowExpr, WindowExpr};
use datafusion::physical_optimizer::PhysicalOptimizerRule;
use datafusion::physical_plan::metrics::{
    BaselineMetrics, ExecutionPlanMetricsSet, MetricsSet, RecordOutput,
};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::windows::{BoundedWindowAggExec, WindowAggExec};
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, Distribution, ExecutionPlan, ExecutionPlanProperties,
    InputOrderMode, PlanProperties,
};
use futures::{StreamExt, TryStreamExt};

/// The physical optimizer rule; it runs after DataFusion's rules, once the window execs' inputs
/// are sorted.
#[derive(Debug)]
pub(crate) struct RunningWindows;

impl PhysicalOptimizerRule for RunningWindows {
    fn optimize(
        &self,
        plan: Arc<dyn ExecutionPlan>,
        config: &ConfigOptions,
    ) -> DFResult<Arc<dyn ExecutionPlan>> {
        if !super::switches(config).running_windows {
            return Ok(plan);
        }
        plan.transform_up(|node| {
            Ok(match RunningWindowExec::in_place_of(&node) {
                Some(exec) => Transformed::yes(Arc::new(exec) as Arc<dyn ExecutionPlan>),
                None => Transformed::no(node),
            })
        })
        .data()
    }

    fn name(&self) -> &str {
        "running_windows"
    }

    fn schema_check(&self) -> bool {
        true
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Function {
    Sum,
    Count,
    Min,
    Max,
}

/// One window function, computed as a running value.
#[derive(Debug)]
struct Running {
    function: Function,
    argument: Arc<dyn PhysicalExpr>,
    /// The type of the window's column.
    output: DataType,
    /// Whether rows that tie on the ORDER BY share their value (RANGE and GROUPS frames).
    ties: bool,
    name: String,
}

impl Running {
    /// The running form of `expr` over rows of `input`, if it has one.
    fn of(expr: &Arc<dyn WindowExpr>, input: &SchemaRef) -> Option<Self> {
        let plain = expr.as_any().downcast_ref::<PlainAggregateWindowExpr>()?;
        let frame = expr.get_window_frame();
        let from_the_start =
            matches!(&frame.start_bound, WindowFrameBound::Preceding(v) if v.is_null());
        if !from_the_start
            || frame.end_bound != WindowFrameBound::CurrentRow
            || expr.order_by().is_empty()
            || !without_filter(plain)
        {
            return None;
        }
        let aggregate = plain.get_aggregate_expr();
        if aggregate.is_distinct() || aggregate.ignore_nulls() || !aggregate.order_bys().is_empty()
        {
            return None;
        }
        let [argument]: [Arc<dyn PhysicalExpr>; 1] = aggregate.expressions().try_into().ok()?;
        let function = match aggregate.fun().name() {
            "sum" => Function::Sum,
            "count" => Function::Count,
            "min" => Function::Min,
            "max" => Function::Max,
            _ => return None,
        };
        let output = aggregate.field().data_type().clone();
        let given = argument.data_type(input).ok()?;
        let known = match function {
            Function::Count => output == DataType::Int64,
            Function::Sum => match (&given, &output) {
                (DataType::Decimal128(_, s), DataType::Decimal128(_, t)) => s == t,
                (DataType::Int64 | DataType::Float64, _) => given == output,
                _ => false,
            },
            Function::Min | Function::Max => given == output && ordered(&given),
        };
        known.then(|| Running {
            function,
            argument,
            output,
            ties: frame.units != WindowFrameUnits::Rows,
            name: expr.name().to_string(),
        })
    }

    /// The function's values over `rows` (a batch's argument), run by run, and, when the batch's
    /// first partition continues the batch before, the value there (`carry`, a one-row array).
    fn values(&self, rows: &ArrayRef, runs: &Runs, carry: Option<&ArrayRef>) -> DFResult<ArrayRef> {
        let output = &self.output;
        let extreme = Extreme {
            max: self.function == Function::Max,
        };
        match (self.function, rows.data_type()) {
            (Function::Count, _) => Ok(counts(rows, runs, carry)),
            (Function::Sum, DataType::Int64) => running(&BigintSum, rows, runs, carry, output),
            (Function::Sum, DataType::Float64) => running(&FloatSum, rows, runs, carry, output),
            (Function::Sum, DataType::Decimal128(..)) => {
                running(&DecimalSum, rows, runs, carry, output)
            }
            (_, DataType::Int8) => running::<Int8Type, _>(&extreme, rows, runs, carry, output),
            (_, DataType::Int16) => running::<Int16Type, _>(&extreme, rows, runs, carry, output),
            (_, DataType::Int32) => running::<Int32Type, _>(&extreme, rows, runs, carry, output),
            (_, DataType::Int64) => running::<Int64Type, _>(&extreme, rows, runs, carry, output),
            (_, DataType::UInt8) => running::<UInt8Type, _>(&extreme, rows, runs, carry, output),
            (_, DataType::UInt16) => running::<UInt16Type, _>(&extreme, rows, runs, carry, output),
            (_, DataType::UInt32) => running::<UInt32Type, _>(&extreme, rows, runs, carry, output),
            (_, DataType::UInt64) => running::<UInt64Type, _>(&extreme, rows, runs, carry, output),
            (_, DataType::Decimal128(..)) => {
                running::<Decimal128Type, _>(&extreme, rows, runs, carry, output)
            }
            (_, DataType::Date32) => running::<Date32Type, _>(&extreme, rows, runs, carry, output),
            (_, DataType::Date64) => running::<Date64Type, _>(&extreme, rows, runs, carry, output),
            (_, DataType::Timestamp(TimeUnit::Second, _)) => {
                running::<TimestampSecondType, _>(&extreme, rows, runs, carry, output)
            }
            (_, DataType::Timestamp(TimeUnit::Millisecond, _)) => {
                running::<TimestampMillisecondType, _>(&extreme, rows, runs, carry, output)
            }
            (_, DataType::Timestamp(TimeUnit::Microsecond, _)) => {
                running::<TimestampMicrosecondType, _>(&extreme, rows, runs, carry, output)
            }
            (_, DataType::Timestamp(TimeUnit::Nanosecond, _)) => {
                running::<TimestampNanosecondType, _>(&extreme, rows, runs, carry, output)
            }
            (_, other) => Err(unknown(other)),
        }
    }
}

/// Whether `expr` has no FILTER clause. DataFusion 54.1 keeps the clause private (its accessor is on
/// a trait it does not export), so this reads the derived `Debug` form, whose last field it is:
/// if a DataFusion upgrade moves the field, no window is rewritten (and the engine test that
/// expects one fails) rather than a filtered one computed without its filter.
fn without_filter(expr: &PlainAggregateWindowExpr) -> bool {
    format!("{expr:?}").ends_with("filter: None }")
}

/// Types whose minimum and maximum [`Running::values`] computes: those whose order is their
/// values' order as integers.
fn ordered(data_type: &DataType) -> bool {
    data_type.is_integer()
        || matches!(
            data_type,
            DataType::Decimal128(..)
                | DataType::Date32
                | DataType::Date64
                | DataType::Timestamp(..)
        )
}

fn unknown(data_type: &DataType) -> DataFusionError {
    DataFusionError::Internal(format!(
        "RunningWindowExec has no running value of {data_type}"
    ))
}

/// The ranges between consecutive `starts`, the last one ending at `rows`.
fn segments(starts: &[usize], rows: usize) -> impl Iterator<Item = (usize, usize)> + '_ {
    let ends = starts.iter().skip(1).copied().chain(iter::once(rows));
    starts.iter().copied().zip(ends)
}

/// Where a batch's partitions start, and the runs of rows that share a function's value: rows that
/// tie on the ORDER BY in a RANGE or GROUPS frame (`ties`), each row alone in a ROWS frame (None).
/// A partition's start is always a run's start.
struct Runs<'a> {
    partitions: &'a [usize],
    ties: Option<&'a [usize]>,
    rows: usize,
}

impl Runs<'_> {
    /// Each run of ties, and whether it starts a partition.
    fn iter(&self, ties: &[usize]) -> impl Iterator<Item = (bool, Range<usize>)> {
        let mut partitions = self.partitions.iter().copied().peekable();
        segments(ties, self.rows)
            .map(move |(start, end)| (partitions.next_if_eq(&start).is_some(), start..end))
    }

    /// Each row, and whether it starts a partition.
    fn rows(&self) -> impl Iterator<Item = (bool, usize)> {
        let mut partitions = self.partitions.iter().copied().peekable();
        (0..self.rows).map(move |i| (partitions.next_if_eq(&i).is_some(), i))
    }
}

/// How a function adds up its values: a run's own value (DataFusion hands a run of ties to the
/// accumulator at once), and the running value with it.
trait Fold<T: ArrowPrimitiveType> {
    /// What the running value is kept in.
    type Acc: Copy;
    fn widen(value: T::Native) -> Self::Acc;
    fn narrow(acc: Self::Acc) -> T::Native;
    /// The run's own value; None when all its values are NULL.
    fn run(&self, values: &PrimitiveArray<T>, run: Range<usize>) -> DFResult<Option<Self::Acc>>;
    /// The own value of a run of one row that is not NULL.
    fn one(value: T::Native) -> Self::Acc {
        Self::widen(value)
    }
    /// The running value of a partition's first run that has one.
    fn first(&self, run: Self::Acc) -> DFResult<Self::Acc> {
        Ok(run)
    }
    /// The running value with a run's own added.
    fn add(&self, so_far: Self::Acc, run: Self::Acc) -> DFResult<Self::Acc>;
}

fn valid<T: ArrowPrimitiveType>(
    values: &PrimitiveArray<T>,
    run: Range<usize>,
) -> impl Iterator<Item = T::Native> + '_ {
    run.filter(|&i| values.is_valid(i)).map(|i| values.value(i))
}

/// `min` and `max`.
struct Extreme {
    max: bool,
}

impl Extreme {
    /// The least or greatest of `a` and `v`.
    fn pick<N: PartialOrd>(&self, a: N, v: N) -> N {
        if (self.max && v > a) || (!self.max && v < a) {
            v
        } else {
            a
        }
    }
}

impl<T: ArrowPrimitiveType> Fold<T> for Extreme {
    type Acc = T::Native;
    fn widen(value: T::Native) -> T::Native {
        value
    }
    fn narrow(acc: T::Native) -> T::Native {
        acc
    }
    fn run(&self, values: &PrimitiveArray<T>, run: Range<usize>) -> DFResult<Option<T::Native>> {
        Ok(valid(values, run).reduce(|a, v| self.pick(a, v)))
    }
    fn add(&self, so_far: T::Native, run: T::Native) -> DFResult<T::Native> {
        Ok(self.pick(so_far, run))
    }
}

/// A bigint `sum`: exact within a run (SQE's sum checks the total of what it is handed), failing
/// with Trino's message when the running sum leaves bigint.
struct BigintSum;

impl Fold<Int64Type> for BigintSum {
    type Acc = i128;
    fn widen(value: i64) -> i128 {
        i128::from(value)
    }
    fn narrow(acc: i128) -> i64 {
        // `first` and `add` keep it within bigint.
        i64::try_from(acc).unwrap_or_default()
    }
    fn run(&self, values: &Int64Array, run: Range<usize>) -> DFResult<Option<i128>> {
        Ok(valid(values, run).map(i128::from).reduce(|a, v| a + v))
    }
    fn first(&self, run: i128) -> DFResult<i128> {
        self.add(0, run)
    }
    fn add(&self, so_far: i128, run: i128) -> DFResult<i128> {
        let sum = so_far + run;
        match i64::try_from(sum) {
            Ok(_) => Ok(sum),
            Err(_) => Err(DataFusionError::Execution(format!(
                "bigint addition overflow: {so_far} + {run}"
            ))),
        }
    }
}

/// A double `sum`, added as DataFusion adds it: a run's values by arrow's `sum` (from 0, so -0.0
/// alone is 0.0), then the run's sum to the running one.
struct FloatSum;

impl Fold<Float64Type> for FloatSum {
    type Acc = f64;
    fn widen(value: f64) -> f64 {
        value
    }
    fn narrow(acc: f64) -> f64 {
        acc
    }
    fn run(&self, values: &Float64Array, run: Range<usize>) -> DFResult<Option<f64>> {
        Ok(if run.len() == 1 {
            values
                .is_valid(run.start)
                .then(|| 0.0 + values.value(run.start))
        } else {
            sum(&values.slice(run.start, run.len()))
        })
    }
    fn one(value: f64) -> f64 {
        0.0 + value
    }
    fn add(&self, so_far: f64, run: f64) -> DFResult<f64> {
        Ok(so_far + run)
    }
}

/// A decimal `sum`, which fails where its 128 bits would wrap around (DataFusion's wraps).
struct DecimalSum;

impl DecimalSum {
    fn checked(a: i128, b: i128) -> DFResult<i128> {
        a.checked_add(b).ok_or_else(|| {
            DataFusionError::Execution(format!(
                "decimal addition overflow: {a} + {b} (unscaled) does not fit 128 bits"
            ))
        })
    }
}

impl Fold<Decimal128Type> for DecimalSum {
    type Acc = i128;
    fn widen(value: i128) -> i128 {
        value
    }
    fn narrow(acc: i128) -> i128 {
        acc
    }
    fn run(&self, values: &Decimal128Array, run: Range<usize>) -> DFResult<Option<i128>> {
        let mut total = None;
        for v in valid(values, run) {
            total = Some(match total {
                Some(t) => Self::checked(t, v)?,
                None => v,
            });
        }
        Ok(total)
    }
    fn add(&self, so_far: i128, run: i128) -> DFResult<i128> {
        Self::checked(so_far, run)
    }
}

/// `fold`'s running value over `rows`, run by run: NULL until a partition's first value that is
/// not (or `carry`'s value, where the batch's first partition continues the batch before).
fn running<T: ArrowPrimitiveType, F: Fold<T>>(
    fold: &F,
    rows: &ArrayRef,
    runs: &Runs,
    carry: Option<&ArrayRef>,
    output: &DataType,
) -> DFResult<ArrayRef> {
    let values = rows.as_primitive::<T>();
    let mut so_far = carry
        .map(|c| c.as_primitive::<T>())
        .filter(|c| c.is_valid(0))
        .map(|c| F::widen(c.value(0)));
    let mut out = PrimitiveBuilder::<T>::with_capacity(values.len());
    let Some(ties) = runs.ties else {
        for (starts_partition, i) in runs.rows() {
            if starts_partition && i > 0 {
                so_far = None;
            }
            if values.is_valid(i) {
                let value = F::one(values.value(i));
                so_far = Some(match so_far {
                    Some(a) => fold.add(a, value)?,
                    None => fold.first(value)?,
                });
            }
            out.append_option(so_far.map(F::narrow));
        }
        return Ok(Arc::new(out.finish().with_data_type(output.clone())));
    };
    for (n, (starts_partition, run)) in runs.iter(ties).enumerate() {
        if starts_partition && n > 0 {
            so_far = None;
        }
        let rows = run.len();
        if let Some(value) = fold.run(values, run)? {
            so_far = Some(match so_far {
                Some(a) => fold.add(a, value)?,
                None => fold.first(value)?,
            });
        }
        match so_far {
            Some(a) => out.append_value_n(F::narrow(a), rows),
            None => out.append_nulls(rows),
        }
    }
    Ok(Arc::new(out.finish().with_data_type(output.clone())))
}

/// The running count of `rows`' values that are not NULL, run by run.
fn counts(rows: &ArrayRef, runs: &Runs, carry: Option<&ArrayRef>) -> ArrayRef {
    let nulls = rows.logical_nulls();
    let valid = |i: usize| nulls.as_ref().is_none_or(|b| b.is_valid(i));
    let mut so_far = carry.map_or(0, |c| c.as_primitive::<Int64Type>().value(0));
    let mut out = Vec::with_capacity(rows.len());
    let Some(ties) = runs.ties else {
        for (starts_partition, i) in runs.rows() {
            if starts_partition && i > 0 {
                so_far = 0;
            }
            so_far += i64::from(valid(i));
            out.push(so_far);
        }
        return Arc::new(Int64Array::from(out));
    };
    for (n, (starts_partition, run)) in runs.iter(ties).enumerate() {
        if starts_partition && n > 0 {
            so_far = 0;
        }
        let rows = run.len();
        so_far += run.filter(|&i| valid(i)).count() as i64;
        out.extend(iter::repeat_n(so_far, rows));
    }
    Arc::new(Int64Array::from(out))
}

/// In place of a window exec whose functions all run from the partition's start to the current
/// row: see the module doc.
#[derive(Debug)]
pub(crate) struct RunningWindowExec {
    /// The window exec this one computes: its schema, properties and input requirements are this
    /// one's.
    window: Arc<dyn ExecutionPlan>,
    functions: Arc<[Running]>,
    partition_by: Vec<Arc<dyn PhysicalExpr>>,
    order_by: Vec<Arc<dyn PhysicalExpr>>,
    metrics: ExecutionPlanMetricsSet,
}

impl RunningWindowExec {
    /// The exec that computes `node`, if it is a window exec over input sorted by its partition
    /// keys and ORDER BY whose every function has a running form.
    fn in_place_of(node: &Arc<dyn ExecutionPlan>) -> Option<Self> {
        let exprs = if let Some(window) = node.downcast_ref::<BoundedWindowAggExec>() {
            if window.input_order_mode != InputOrderMode::Sorted {
                return None;
            }
            window.window_expr()
        } else {
            node.downcast_ref::<WindowAggExec>()?.window_expr()
        };
        let first = exprs.first()?;
        let child = node.children().first().copied()?;
        // The partitions are told apart by their keys changing from one row to the next, which
        // holds only over input sorted as the window requires (as it is once DataFusion's rules
        // have run; a rule after them that lost the order would otherwise go unnoticed).
        let required = node
            .required_input_ordering()
            .into_iter()
            .next()
            .flatten()?;
        let sorted = child
            .equivalence_properties()
            .ordering_satisfy_requirement(required.into_single());
        if !matches!(sorted, Ok(true)) {
            return None;
        }
        let input = child.schema();
        let functions = exprs
            .iter()
            .map(|e| {
                let alike =
                    e.partition_by() == first.partition_by() && e.order_by() == first.order_by();
                alike.then(|| Running::of(e, &input)).flatten()
            })
            .collect::<Option<Vec<_>>>()?;
        Some(Self {
            window: Arc::clone(node),
            functions: functions.into(),
            partition_by: first.partition_by().to_vec(),
            order_by: first
                .order_by()
                .iter()
                .map(|s| Arc::clone(&s.expr))
                .collect(),
            metrics: ExecutionPlanMetricsSet::new(),
        })
    }
}

impl DisplayAs for RunningWindowExec {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<&str> = self.functions.iter().map(|r| r.name.as_str()).collect();
        write!(f, "RunningWindowExec: wdw=[{}]", names.join(", "))
    }
}

impl ExecutionPlan for RunningWindowExec {
    fn name(&self) -> &str {
        "RunningWindowExec"
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        self.window.properties()
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        self.window.children()
    }

    /// The window exec over the new input, in this form if it still has one.
    fn with_new_children(
        self: Arc<Self>,
        children: Vec<Arc<dyn ExecutionPlan>>,
    ) -> DFResult<Arc<dyn ExecutionPlan>> {
        let window = Arc::clone(&self.window).with_new_children(children)?;
        Ok(match Self::in_place_of(&window) {
            Some(exec) => Arc::new(exec),
            None => window,
        })
    }

    fn required_input_ordering(&self) -> Vec<Option<OrderingRequirements>> {
        self.window.required_input_ordering()
    }

    fn required_input_distribution(&self) -> Vec<Distribution> {
        self.window.required_input_distribution()
    }

    fn maintains_input_order(&self) -> Vec<bool> {
        vec![true]
    }

    fn partition_statistics(&self, partition: Option<usize>) -> DFResult<Arc<Statistics>> {
        self.window.partition_statistics(partition)
    }

    fn metrics(&self) -> Option<MetricsSet> {
        Some(self.metrics.clone_inner())
    }

    fn execute(
        &self,
        partition: usize,
        context: Arc<TaskContext>,
    ) -> DFResult<SendableRecordBatchStream> {
        let Some(input) = self.window.children().first().copied() else {
            return Err(DataFusionError::Internal(
                "RunningWindowExec has one input".into(),
            ));
        };
        let input = input.execute(partition, context)?;
        let baseline = BaselineMetrics::new(&self.metrics, partition);
        let schema = self.window.schema();
        let state = Partition {
            functions: Arc::clone(&self.functions),
            partition_by: self.partition_by.clone(),
            order_by: self.order_by.clone(),
            ties: self.functions.iter().any(|r| r.ties),
            schema: Arc::clone(&schema),
            last_key: None,
            last_values: Vec::new(),
            held: Vec::new(),
            held_ties: Vec::new(),
        };
        // The input's batches, then its end (None), which lets the last run of ties out.
        // After an error the stream ends: the rows held back are lost with it.
        let ends = input.map(Some).chain(futures::stream::once(async { None }));
        let stream = ends
            .scan((state, false), move |(state, failed), next| {
                if *failed {
                    return futures::future::ready(None);
                }
                let timer = baseline.elapsed_compute().timer();
                let out = match next {
                    Some(Ok(batch)) => state.push(Some(batch)),
                    Some(Err(e)) => Err(e),
                    None => {
                        let last = state.push(None);
                        baseline.done();
                        last
                    }
                };
                timer.done();
                match &out {
                    Ok(b) if b.num_rows() > 0 => {
                        b.record_output(&baseline);
                    }
                    Ok(_) => {}
                    Err(_) => *failed = true,
                }
                futures::future::ready(Some(out))
            })
            .try_filter(|b| futures::future::ready(b.num_rows() > 0));
        Ok(Box::pin(RecordBatchStreamAdapter::new(
            schema,
            stream.boxed(),
        )))
    }
}

/// One partition's stream: what carries over from one batch to the next.
struct Partition {
    functions: Arc<[Running]>,
    partition_by: Vec<Arc<dyn PhysicalExpr>>,
    order_by: Vec<Arc<dyn PhysicalExpr>>,
    ties: bool,
    schema: SchemaRef,
    /// The partition key of the last row sent on (None before the first).
    last_key: Option<Vec<ScalarValue>>,
    /// Each function's value at that row, as a one-row array.
    last_values: Vec<ArrayRef>,
    /// The rows received and not sent on: the last run of ties, which the next batch may continue,
    /// in the batches they came in (joined once the run ends: a run of many batches is copied
    /// once, not once per batch).
    held: Vec<RecordBatch>,
    /// That run's partition key and ORDER BY values.
    held_ties: Vec<ScalarValue>,
}

fn evaluate(exprs: &[Arc<dyn PhysicalExpr>], batch: &RecordBatch) -> DFResult<Vec<ArrayRef>> {
    exprs
        .iter()
        .map(|e| e.evaluate(batch)?.into_array(batch.num_rows()))
        .collect()
}

/// The starts of the runs of equal rows in `columns` (one run when there are no columns).
fn run_starts(columns: &[ArrayRef]) -> DFResult<Vec<usize>> {
    if columns.is_empty() {
        return Ok(vec![0]);
    }
    Ok(partition(columns)?
        .ranges()
        .into_iter()
        .map(|r| r.start)
        .collect())
}

impl Partition {
    /// `batch`'s partition key and ORDER BY columns, which rows tie on.
    fn tie_columns(&self, batch: &RecordBatch) -> DFResult<Vec<ArrayRef>> {
        let mut columns = evaluate(&self.partition_by, batch)?;
        columns.extend(evaluate(&self.order_by, batch)?);
        Ok(columns)
    }

    /// Whether every row of `batch` ties with the rows held back: its last one does, the rows
    /// being sorted by the partition key and the ORDER BY.
    fn all_tie_with_held(&self, batch: &RecordBatch) -> DFResult<bool> {
        if self.held.is_empty() || batch.num_rows() == 0 {
            return Ok(false);
        }
        let columns = self.tie_columns(&batch.slice(batch.num_rows() - 1, 1))?;
        Ok(values_at(&columns, 0)? == self.held_ties)
    }

    /// The window's rows for `batch` (None: the input has ended), as far as they are known.
    fn push(&mut self, batch: Option<RecordBatch>) -> DFResult<RecordBatch> {
        let end = batch.is_none();
        if let Some(next) = &batch
            && self.all_tie_with_held(next)?
        {
            self.held.push(next.clone());
            return Ok(RecordBatch::new_empty(Arc::clone(&self.schema)));
        }
        let mut parts = std::mem::take(&mut self.held);
        parts.extend(batch);
        let batch = match parts.as_slice() {
            [] => return Ok(RecordBatch::new_empty(Arc::clone(&self.schema))),
            [one] => one.clone(),
            [first, ..] => concat_batches(&first.schema(), &parts)?,
        };
        let rows = batch.num_rows();
        if rows == 0 {
            return Ok(RecordBatch::new_empty(Arc::clone(&self.schema)));
        }
        // Where the rows' ties start, and how many rows are sent on now: all but the last run of
        // ties, which is held back until the input ends or a row that does not tie arrives.
        let (tie_starts, ready) = if self.ties {
            let columns = self.tie_columns(&batch)?;
            let starts = run_starts(&columns)?;
            let ready = if end {
                rows
            } else {
                starts.last().copied().unwrap_or(0)
            };
            if ready < rows {
                self.held = vec![batch.slice(ready, rows - ready)];
                self.held_ties = values_at(&columns, ready)?;
            }
            (starts, ready)
        } else {
            (Vec::new(), rows)
        };
        if ready == 0 {
            return Ok(RecordBatch::new_empty(Arc::clone(&self.schema)));
        }
        let batch = batch.slice(0, ready);
        let keys = evaluate(&self.partition_by, &batch)?;
        let partitions = run_starts(&keys)?;
        let continues = match &self.last_key {
            Some(last) => values_at(&keys, 0)? == *last,
            None => false,
        };
        let tie_starts: Vec<usize> = tie_starts.into_iter().filter(|s| *s < ready).collect();
        let ties = Runs {
            partitions: &partitions,
            ties: Some(&tie_starts),
            rows: ready,
        };
        let alone = Runs {
            partitions: &partitions,
            ties: None,
            rows: ready,
        };
        let mut columns = batch.columns().to_vec();
        for (i, function) in self.functions.iter().enumerate() {
            let argument = function.argument.evaluate(&batch)?.into_array(ready)?;
            let carry = self.last_values.get(i).filter(|_| continues);
            let runs = if function.ties { &ties } else { &alone };
            columns.push(function.values(&argument, runs, carry)?);
        }
        self.last_key = Some(values_at(&keys, ready - 1)?);
        let inputs = batch.num_columns();
        self.last_values = columns[inputs..]
            .iter()
            .map(|c| c.slice(ready - 1, 1))
            .collect();
        Ok(RecordBatch::try_new(Arc::clone(&self.schema), columns)?)
    }
}

/// The values of `columns` in row `row`.
fn values_at(columns: &[ArrayRef], row: usize) -> DFResult<Vec<ScalarValue>> {
    columns
        .iter()
        .map(|c| ScalarValue::try_from_array(c, row))
        .collect()
}
