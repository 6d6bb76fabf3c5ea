//! The SQL standard's multiset functions that Trino's function list names (`functions/multiset`):
//! the aggregates `collect`, `fusion` and `intersection`, and the scalars `element` and `set`.
//! SQE has no MULTISET type: a multiset is an ARRAY whose order carries no meaning (each function
//! keeps the order in which it met the elements, so answers are repeatable). As the standard's
//! set functions do, the aggregates skip NULL inputs and give NULL for a group without any;
//! elements are equal when they are not distinct, so a NULL element matches a NULL element.

use std::collections::HashMap;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, BooleanArray, ListArray, UInt32Array};
use arrow::buffer::OffsetBuffer;
use arrow::compute::{concat, filter, is_not_null, take};
use arrow::datatypes::{DataType, Field, FieldRef};
use arrow::row::{RowConverter, SortField};
use datafusion::common::{Result, ScalarValue};
use datafusion::logical_expr::function::{AccumulatorArgs, StateFieldsArgs};
use datafusion::logical_expr::{
    Accumulator, AggregateUDF, AggregateUDFImpl, ScalarUDF, Signature, Volatility,
};

use crate::udf::{Delegate, invalid, per_row, unexpected};

pub fn functions() -> Vec<Arc<ScalarUDF>> {
    vec![
        element(),
        // The multiset without its duplicates: DataFusion's array_distinct keeps the first of
        // each, in order.
        Delegate::new(
            "set",
            |_: &[DataType]| datafusion::functions_nested::set_ops::array_distinct_udf(),
            false,
        )
        .udf(),
    ]
}

pub(crate) fn aggregates() -> Vec<Arc<AggregateUDF>> {
    [Kind::Collect, Kind::Fusion, Kind::Intersection]
        .map(|k| Arc::new(AggregateUDF::new_from_impl(Multiset::new(k))))
        .into()
}

/// `element(m)`: the only element of `m`; NULL for an empty multiset, an error for a larger one.
fn element() -> Arc<ScalarUDF> {
    per_row(
        "element",
        |args| match args {
            [DataType::List(_)] => Ok(args.to_vec()),
            [DataType::LargeList(f) | DataType::FixedSizeList(f, _)] => {
                Ok(vec![DataType::List(Arc::clone(f))])
            }
            _ => unexpected("element", args, &["array(E)"]),
        },
        |args| match args {
            [DataType::List(f)] => Ok(f.data_type().clone()),
            _ => unexpected("element", args, &["array(E)"]),
        },
        |row| {
            let ScalarValue::List(list) = &row[0] else {
                return invalid("element takes an array");
            };
            let values = list.value(0);
            match values.len() {
                0 => ScalarValue::try_from(values.data_type()),
                1 => ScalarValue::try_from_array(&values, 0),
                n => invalid(format!(
                    "element: the multiset has {n} elements; it must have at most one"
                )),
            }
        },
    )
    .udf()
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Kind {
    /// `collect(x)`: the multiset of a group's values.
    Collect,
    /// `fusion(m)`: the union of a group's multisets, every element as often as in all of them.
    Fusion,
    /// `intersection(m)`: the elements common to all of a group's multisets, each as often as
    /// in the one holding it least often.
    Intersection,
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct Multiset {
    kind: Kind,
    signature: Signature,
}

impl Multiset {
    fn new(kind: Kind) -> Self {
        let signature = match kind {
            Kind::Collect => Signature::any(1, Volatility::Immutable),
            Kind::Fusion | Kind::Intersection => Signature::user_defined(Volatility::Immutable),
        };
        Self { kind, signature }
    }

    /// The element type of the answer, from the argument's type.
    fn element_field(&self, arg: &DataType) -> Result<FieldRef> {
        match (self.kind, arg) {
            (Kind::Collect, t) => Ok(Arc::new(Field::new_list_field(t.clone(), true))),
            (_, DataType::List(f) | DataType::LargeList(f) | DataType::FixedSizeList(f, _)) => {
                Ok(Arc::clone(f))
            }
            _ => unexpected(self.name(), std::slice::from_ref(arg), &["array(E)"]),
        }
    }
}

impl AggregateUDFImpl for Multiset {
    fn name(&self) -> &str {
        match self.kind {
            Kind::Collect => "collect",
            Kind::Fusion => "fusion",
            Kind::Intersection => "intersection",
        }
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn coerce_types(&self, args: &[DataType]) -> Result<Vec<DataType>> {
        match args {
            [DataType::List(f) | DataType::LargeList(f) | DataType::FixedSizeList(f, _)] => {
                Ok(vec![DataType::List(Arc::clone(f))])
            }
            [DataType::Null] => Ok(vec![DataType::new_list(DataType::Null, true)]),
            _ => unexpected(self.name(), args, &["array(E)"]),
        }
    }

    fn return_type(&self, args: &[DataType]) -> Result<DataType> {
        match args {
            [arg] => Ok(DataType::List(self.element_field(arg)?)),
            _ => unexpected(self.name(), args, &["E"]),
        }
    }

    fn accumulator(&self, args: AccumulatorArgs) -> Result<Box<dyn Accumulator>> {
        let field = self.element_field(args.expr_fields[0].data_type())?;
        Ok(Box::new(MultisetAccumulator {
            kind: self.kind,
            converter: RowConverter::new(vec![SortField::new(field.data_type().clone())])?,
            field,
            parts: Vec::new(),
            common: None,
            bytes: 0,
        }))
    }

    fn state_fields(&self, args: StateFieldsArgs) -> Result<Vec<FieldRef>> {
        let field = self.element_field(args.input_fields[0].data_type())?;
        Ok(vec![Arc::new(Field::new(
            format!("{}[{}]", args.name, self.name()),
            DataType::List(field),
            true,
        ))])
    }
}

#[derive(Debug)]
struct MultisetAccumulator {
    kind: Kind,
    field: FieldRef,
    converter: RowConverter,
    /// `collect` and `fusion`: the elements met so far, in arrays to concatenate at the end.
    parts: Vec<ArrayRef>,
    /// `intersection`: the elements common to every multiset met so far (None before the first).
    common: Option<ArrayRef>,
    /// The memory `parts` or `common` hold, counted as they change.
    bytes: usize,
}

impl MultisetAccumulator {
    /// Takes in one multiset (a group's value for `fusion` and `intersection`, or a partial
    /// answer of any of the three).
    fn add(&mut self, elements: ArrayRef) -> Result<()> {
        // A copy: the elements may be a slice of a whole batch, which would stay alive with it.
        let elements = take(
            elements.as_ref(),
            &UInt32Array::from_iter_values(0..elements.len() as u32),
            None,
        )?;
        if self.kind != Kind::Intersection {
            self.bytes += elements.get_array_memory_size();
            self.parts.push(elements);
            return Ok(());
        }
        let Some(common) = &self.common else {
            self.bytes = elements.get_array_memory_size();
            self.common = Some(elements);
            return Ok(());
        };
        // Each element of `common` stays as long as `elements` has an unused equal one.
        let mut counts: HashMap<Vec<u8>, usize> = HashMap::new();
        let theirs = self.converter.convert_columns(&[elements])?;
        for row in theirs.iter() {
            *counts.entry(row.as_ref().to_vec()).or_default() += 1;
        }
        let ours = self.converter.convert_columns(&[Arc::clone(common)])?;
        let keep: BooleanArray = ours
            .iter()
            .map(|row| {
                let left = counts.get_mut(row.as_ref()).filter(|n| **n > 0);
                Some(left.map(|n| *n -= 1).is_some())
            })
            .collect();
        let kept = filter(common, &keep)?;
        self.bytes = kept.get_array_memory_size();
        self.common = Some(kept);
        Ok(())
    }

    fn add_lists(&mut self, lists: &ListArray) -> Result<()> {
        for i in 0..lists.len() {
            if lists.is_valid(i) {
                self.add(lists.value(i))?;
            }
        }
        Ok(())
    }

    /// The answer so far; NULL before any input.
    fn current(&self) -> Result<ScalarValue> {
        let elements = match self.kind {
            Kind::Intersection => self.common.clone(),
            _ if self.parts.is_empty() => None,
            _ => {
                let parts: Vec<&dyn Array> = self.parts.iter().map(|a| a.as_ref()).collect();
                Some(concat(&parts)?)
            }
        };
        let list = match elements {
            Some(values) => ListArray::try_new(
                Arc::clone(&self.field),
                OffsetBuffer::from_lengths([values.len()]),
                values,
                None,
            )?,
            None => ListArray::new_null(Arc::clone(&self.field), 1),
        };
        Ok(ScalarValue::List(Arc::new(list)))
    }
}

impl Accumulator for MultisetAccumulator {
    fn update_batch(&mut self, values: &[ArrayRef]) -> Result<()> {
        let values = &values[0];
        match self.kind {
            Kind::Collect => {
                let present = filter(values, &is_not_null(values)?)?;
                if !present.is_empty() {
                    self.add(present)?;
                }
                Ok(())
            }
            _ => self.add_lists(values.as_list::<i32>()),
        }
    }

    fn merge_batch(&mut self, states: &[ArrayRef]) -> Result<()> {
        self.add_lists(states[0].as_list::<i32>())
    }

    fn state(&mut self) -> Result<Vec<ScalarValue>> {
        Ok(vec![self.current()?])
    }

    fn evaluate(&mut self) -> Result<ScalarValue> {
        self.current()
    }

    fn size(&self) -> usize {
        size_of::<Self>() + self.bytes + self.converter.size()
    }
}
