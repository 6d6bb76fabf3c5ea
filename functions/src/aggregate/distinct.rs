//! `f(DISTINCT x, …)` for SQE's own aggregates. DataFusion leaves DISTINCT to each aggregate's
//! accumulator (it rewrites a query with a single DISTINCT aggregate into a GROUP BY, but not one
//! with two or more), so each of SQE's aggregates is registered inside [`Distinct`]: with DISTINCT,
//! an accumulator passes on each distinct row of arguments once, and its partial state is those
//! rows, one list per argument, so merging partial states cannot count a value twice.

use std::collections::HashSet;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, ListArray, UInt32Array};
use arrow::buffer::OffsetBuffer;
use arrow::compute::{concat, take};
use arrow::datatypes::{DataType, Field, FieldRef};
use arrow::row::{RowConverter, SortField};
use datafusion::common::{Result, ScalarValue};
use datafusion::logical_expr::function::{AccumulatorArgs, StateFieldsArgs};
use datafusion::logical_expr::{
    Accumulator, AggregateUDF, AggregateUDFImpl, Documentation, Signature,
};

/// What a kept key costs beyond its bytes (the set's slot and the vector's header).
const KEY_OVERHEAD: usize = 48;

/// One of SQE's aggregates, with DISTINCT handled here.
#[derive(Debug, PartialEq, Eq, Hash)]
pub(super) struct Distinct(pub(super) AggregateUDF);

impl AggregateUDFImpl for Distinct {
    fn name(&self) -> &str {
        self.0.name()
    }

    fn aliases(&self) -> &[String] {
        self.0.aliases()
    }

    fn signature(&self) -> &Signature {
        self.0.signature()
    }

    fn coerce_types(&self, args: &[DataType]) -> Result<Vec<DataType>> {
        self.0.inner().coerce_types(args)
    }

    fn return_type(&self, args: &[DataType]) -> Result<DataType> {
        self.0.return_type(args)
    }

    fn is_nullable(&self) -> bool {
        self.0.is_nullable()
    }

    fn default_value(&self, data_type: &DataType) -> Result<ScalarValue> {
        self.0.default_value(data_type)
    }

    fn documentation(&self) -> Option<&Documentation> {
        self.0.documentation()
    }

    fn accumulator(&self, args: AccumulatorArgs) -> Result<Box<dyn Accumulator>> {
        let distinct = args.is_distinct;
        let types: Vec<DataType> = args
            .expr_fields
            .iter()
            .map(|f| f.data_type().clone())
            .collect();
        let inner = self.0.accumulator(args)?;
        if !distinct {
            return Ok(inner);
        }
        Ok(Box::new(DistinctAccumulator {
            converter: RowConverter::new(types.iter().cloned().map(SortField::new).collect())?,
            types,
            seen: HashSet::new(),
            kept: Vec::new(),
            bytes: 0,
            inner,
        }))
    }

    fn state_fields(&self, args: StateFieldsArgs) -> Result<Vec<FieldRef>> {
        if !args.is_distinct {
            return self.0.inner().state_fields(args);
        }
        Ok(args
            .input_fields
            .iter()
            .enumerate()
            .map(|(i, f)| {
                Arc::new(Field::new(
                    format!("{}[distinct {i}]", args.name),
                    DataType::new_list(f.data_type().clone(), true),
                    true,
                ))
            })
            .collect())
    }
}

#[derive(Debug)]
struct DistinctAccumulator {
    types: Vec<DataType>,
    converter: RowConverter,
    /// The rows of arguments met so far, in the row format.
    seen: HashSet<Vec<u8>>,
    /// Those rows, one set of argument arrays per batch that brought new ones.
    kept: Vec<Vec<ArrayRef>>,
    /// The memory `seen` and `kept` hold, counted as they grow.
    bytes: usize,
    inner: Box<dyn Accumulator>,
}

impl DistinctAccumulator {
    /// Passes on the rows of `columns` not met before.
    fn add(&mut self, columns: &[ArrayRef]) -> Result<()> {
        let rows = self.converter.convert_columns(columns)?;
        let mut new_rows = Vec::new();
        for (i, row) in rows.iter().enumerate() {
            let key = row.as_ref();
            if !self.seen.contains(key) {
                self.bytes += key.len() + KEY_OVERHEAD;
                self.seen.insert(key.to_vec());
                new_rows.push(i as u32);
            }
        }
        if new_rows.is_empty() {
            return Ok(());
        }
        // Copies of the new rows (a filter may give a slice that holds the whole batch).
        let indices = UInt32Array::from(new_rows);
        let new = columns
            .iter()
            .map(|c| take(c.as_ref(), &indices, None))
            .collect::<std::result::Result<Vec<_>, _>>()?;
        self.bytes += new.iter().map(|a| a.get_array_memory_size()).sum::<usize>();
        self.inner.update_batch(&new)?;
        self.kept.push(new);
        Ok(())
    }
}

impl Accumulator for DistinctAccumulator {
    fn update_batch(&mut self, values: &[ArrayRef]) -> Result<()> {
        self.add(values)
    }

    fn merge_batch(&mut self, states: &[ArrayRef]) -> Result<()> {
        let lists: Vec<&ListArray> = states.iter().map(|s| s.as_list::<i32>()).collect();
        for row in 0..states.first().map_or(0, |s| s.len()) {
            if lists.iter().any(|l| l.is_null(row)) {
                continue;
            }
            let columns: Vec<ArrayRef> = lists.iter().map(|l| l.value(row)).collect();
            self.add(&columns)?;
        }
        Ok(())
    }

    fn state(&mut self) -> Result<Vec<ScalarValue>> {
        self.types
            .iter()
            .enumerate()
            .map(|(i, t)| {
                let parts: Vec<&dyn Array> = self.kept.iter().map(|k| k[i].as_ref()).collect();
                let values = if parts.is_empty() {
                    arrow::array::new_empty_array(t)
                } else {
                    concat(&parts)?
                };
                let field = Arc::new(Field::new_list_field(t.clone(), true));
                let list = ListArray::try_new(
                    field,
                    OffsetBuffer::from_lengths([values.len()]),
                    values,
                    None,
                )?;
                Ok(ScalarValue::List(Arc::new(list)))
            })
            .collect()
    }

    fn evaluate(&mut self) -> Result<ScalarValue> {
        self.inner.evaluate()
    }

    fn size(&self) -> usize {
        size_of::<Self>() + self.inner.size() + self.converter.size() + self.bytes
    }
}
