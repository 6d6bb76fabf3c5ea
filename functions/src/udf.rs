//! The one shape most of SQE's scalar functions take: a name, how the arguments are coerced, the
//! result type, and a body over whole arrays. Scalars in, scalar out.

use std::collections::HashMap;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use arrow::array::ArrayRef;
use arrow::datatypes::{DataType, Field, FieldRef, TimeUnit};
use datafusion::common::{Result, ScalarValue, exec_err, plan_err};
use datafusion::logical_expr::{
    ColumnarValue, ReturnFieldArgs, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature,
    Volatility,
};

pub(crate) type Coerce = Arc<dyn Fn(&[DataType]) -> Result<Vec<DataType>> + Send + Sync>;
pub(crate) type Returns = Arc<dyn Fn(&[DataType]) -> Result<DataType> + Send + Sync>;
pub(crate) type Body = Arc<dyn Fn(&[ArrayRef], &DataType) -> Result<ArrayRef> + Send + Sync>;

pub(crate) struct Scalar {
    name: &'static str,
    /// Its answer is JSON text: the result field says so (see [`JSON_EXTENSION`]).
    json: bool,
    aliases: Vec<String>,
    signature: Signature,
    coerce: Coerce,
    returns: Returns,
    body: Body,
}

impl Scalar {
    /// A function whose arguments `coerce` turns into the types `body` reads (or refuses, naming
    /// what it expects).
    pub(crate) fn new(
        name: &'static str,
        coerce: impl Fn(&[DataType]) -> Result<Vec<DataType>> + Send + Sync + 'static,
        returns: impl Fn(&[DataType]) -> Result<DataType> + Send + Sync + 'static,
        body: impl Fn(&[ArrayRef], &DataType) -> Result<ArrayRef> + Send + Sync + 'static,
    ) -> Self {
        Self {
            name,
            json: false,
            aliases: Vec::new(),
            signature: Signature::user_defined(Volatility::Immutable),
            coerce: Arc::new(coerce),
            returns: Arc::new(returns),
            body: Arc::new(body),
        }
    }

    pub(crate) fn set_volatility(&mut self, volatility: Volatility) {
        self.signature = Signature::user_defined(volatility);
    }

    pub(crate) fn alias(mut self, name: &str) -> Self {
        self.aliases.push(name.to_string());
        self
    }

    /// Marks the answer as Trino's JSON type.
    pub(crate) fn json(mut self) -> Self {
        self.json = true;
        self
    }

    pub(crate) fn udf(self) -> Arc<ScalarUDF> {
        Arc::new(ScalarUDF::new_from_impl(self))
    }
}

/// The Arrow extension type that marks a column as Trino's JSON type (defined in sqe-sessions, which
/// the protocols share): set on the answers of `json_parse`, `json_extract`, `json_array_get`,
/// `JSON '…'` and `CAST(… AS JSON)`, read by the casts from JSON, `typeof` and Trino HTTP's column
/// types.
pub use sqe_sessions::JSON_EXTENSION;

/// Where a field names its Arrow extension type.
const EXTENSION_TYPE_NAME_KEY: &str = "ARROW:extension:name";

/// Whether a field holds Trino's JSON type (JSON text, marked as such).
pub fn is_json(field: &Field) -> bool {
    field.extension_type_name() == Some(JSON_EXTENSION) && is_text(field.data_type())
}

impl fmt::Debug for Scalar {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Scalar").field("name", &self.name).finish()
    }
}

impl PartialEq for Scalar {
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name
    }
}

impl Eq for Scalar {}

impl Hash for Scalar {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.name.hash(state);
    }
}

impl ScalarUDFImpl for Scalar {
    fn name(&self) -> &str {
        self.name
    }

    fn aliases(&self) -> &[String] {
        &self.aliases
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        (self.coerce)(arg_types)
    }

    fn return_type(&self, arg_types: &[DataType]) -> Result<DataType> {
        (self.returns)(arg_types)
    }

    fn return_field_from_args(&self, args: ReturnFieldArgs) -> Result<FieldRef> {
        let types: Vec<DataType> = args
            .arg_fields
            .iter()
            .map(|f| f.data_type().clone())
            .collect();
        let field = Field::new(self.name, (self.returns)(&types)?, true);
        Ok(Arc::new(if self.json && is_text(field.data_type()) {
            field.with_metadata(HashMap::from([(
                EXTENSION_TYPE_NAME_KEY.to_string(),
                JSON_EXTENSION.to_string(),
            )]))
        } else {
            field
        }))
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let scalar = args
            .args
            .iter()
            .all(|a| matches!(a, ColumnarValue::Scalar(_)));
        let arrays = if args.args.is_empty() {
            Vec::new()
        } else {
            ColumnarValue::values_to_arrays(&args.args)?
        };
        let out = (self.body)(&arrays, args.return_field.data_type())?;
        // Scalars in (or no arguments at all): one value out.
        if scalar {
            return Ok(ColumnarValue::Scalar(ScalarValue::try_from_array(&out, 0)?));
        }
        Ok(ColumnarValue::Array(out))
    }
}

/// How Trino spells an Arrow type: in messages, in `typeof`-like answers, and in the catalog
/// views of tables that are not Iceberg tables.
pub fn type_name(ty: &DataType) -> String {
    use DataType as D;
    if let Some(unit) = crate::zoned::zoned_unit(ty) {
        return format!("timestamp({}) with time zone", precision(&unit));
    }
    match ty {
        D::Null => "unknown".into(),
        D::Boolean => "boolean".into(),
        D::Int8 | D::UInt8 => "tinyint".into(),
        D::Int16 | D::UInt16 => "smallint".into(),
        D::Int32 | D::UInt32 => "integer".into(),
        D::Int64 | D::UInt64 => "bigint".into(),
        D::Float16 | D::Float32 => "real".into(),
        D::Float64 => "double".into(),
        D::Decimal32(p, s) | D::Decimal64(p, s) => format!("decimal({p},{s})"),
        D::Decimal128(p, s) | D::Decimal256(p, s) => format!("decimal({p},{s})"),
        D::Utf8 | D::LargeUtf8 | D::Utf8View => "varchar".into(),
        D::Binary | D::LargeBinary | D::BinaryView | D::FixedSizeBinary(_) => "varbinary".into(),
        D::Date32 | D::Date64 => "date".into(),
        D::Time32(unit) | D::Time64(unit) => format!("time({})", precision(unit)),
        D::Interval(arrow::datatypes::IntervalUnit::YearMonth) => "interval year to month".into(),
        D::Interval(_) | D::Duration(_) => "interval day to second".into(),
        D::Timestamp(unit, tz) => {
            let p = precision(unit);
            match tz {
                Some(_) => format!("timestamp({p}) with time zone"),
                None => format!("timestamp({p})"),
            }
        }
        D::List(f) | D::LargeList(f) | D::FixedSizeList(f, _) | D::ListView(f) => {
            format!("array({})", type_name(f.data_type()))
        }
        D::Map(entries, _) => match entries.data_type() {
            D::Struct(kv) if kv.len() == 2 => format!(
                "map({}, {})",
                type_name(kv[0].data_type()),
                type_name(kv[1].data_type())
            ),
            _ => "map(unknown, unknown)".into(),
        },
        D::Struct(fields) => format!(
            "row({})",
            fields
                .iter()
                .map(|f| format!("{} {}", f.name(), type_name(f.data_type())))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        D::Dictionary(_, v) => type_name(v),
        other => other.to_string().to_lowercase(),
    }
}

/// Trino's message for arguments no signature of the function takes.
pub(crate) fn unexpected<T>(name: &str, args: &[DataType], expected: &[&str]) -> Result<T> {
    let got = args.iter().map(type_name).collect::<Vec<_>>().join(", ");
    let expected = expected
        .iter()
        .map(|e| format!("{name}({e})"))
        .collect::<Vec<_>>()
        .join(", ");
    plan_err!("Unexpected parameters ({got}) for function {name}. Expected: {expected}")
}

pub(crate) fn is_text(t: &DataType) -> bool {
    matches!(
        t,
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View | DataType::Null
    )
}

pub(crate) fn is_integer(t: &DataType) -> bool {
    t.is_integer() || matches!(t, DataType::Null)
}

pub(crate) fn is_temporal(t: &DataType) -> bool {
    matches!(
        t,
        DataType::Date32 | DataType::Date64 | DataType::Timestamp(..)
    )
}

/// The type a date or timestamp argument is read as: dates as days, timestamps as microseconds in
/// their own zone.
pub(crate) fn temporal_target(t: &DataType) -> DataType {
    match t {
        DataType::Timestamp(_, tz) => DataType::Timestamp(TimeUnit::Microsecond, tz.clone()),
        _ => DataType::Date32,
    }
}

/// The error of a value out of a function's domain, as Trino words it.
pub(crate) fn invalid<T>(message: impl Into<String>) -> Result<T> {
    exec_err!("{}", message.into())
}

/// One of DataFusion's functions (or one of ours) under another name, chosen by the argument
/// types; `strict` makes a row NULL when any of its arguments is, as Trino's functions do.
pub(crate) struct Delegate {
    name: &'static str,
    aliases: Vec<String>,
    signature: Signature,
    pick: fn(&[DataType]) -> Arc<ScalarUDF>,
    strict: bool,
}

impl Delegate {
    pub(crate) fn new(
        name: &'static str,
        pick: fn(&[DataType]) -> Arc<ScalarUDF>,
        strict: bool,
    ) -> Self {
        Self {
            name,
            aliases: Vec::new(),
            signature: Signature::user_defined(Volatility::Immutable),
            pick,
            strict,
        }
    }

    pub(crate) fn alias(mut self, name: &str) -> Self {
        self.aliases.push(name.to_string());
        self
    }

    pub(crate) fn udf(self) -> Arc<ScalarUDF> {
        Arc::new(ScalarUDF::new_from_impl(self))
    }
}

impl fmt::Debug for Delegate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Delegate")
            .field("name", &self.name)
            .finish()
    }
}

impl PartialEq for Delegate {
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name
    }
}

impl Eq for Delegate {}

impl Hash for Delegate {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.name.hash(state);
    }
}

impl ScalarUDFImpl for Delegate {
    fn name(&self) -> &str {
        self.name
    }

    fn aliases(&self) -> &[String] {
        &self.aliases
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        let inner = (self.pick)(arg_types);
        let fields: Vec<_> = arg_types
            .iter()
            .map(|t| Arc::new(arrow::datatypes::Field::new("f", t.clone(), true)))
            .collect();
        let coerced = datafusion::logical_expr::type_coercion::functions::fields_with_udf(
            &fields,
            inner.as_ref(),
        )
        .map_err(|e| e.context(format!("function {}", self.name)))?;
        Ok(coerced.iter().map(|f| f.data_type().clone()).collect())
    }

    fn return_type(&self, arg_types: &[DataType]) -> Result<DataType> {
        (self.pick)(arg_types).return_type(arg_types)
    }

    fn return_field_from_args(
        &self,
        args: datafusion::logical_expr::ReturnFieldArgs,
    ) -> Result<arrow::datatypes::FieldRef> {
        let types: Vec<DataType> = args
            .arg_fields
            .iter()
            .map(|f| f.data_type().clone())
            .collect();
        let field = (self.pick)(&types).return_field_from_args(args)?;
        // A strict function's row is NULL when an argument is.
        Ok(if self.strict {
            Arc::new(field.as_ref().clone().with_nullable(true))
        } else {
            field
        })
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let types: Vec<DataType> = args
            .arg_fields
            .iter()
            .map(|f| f.data_type().clone())
            .collect();
        let inner = (self.pick)(&types);
        if !self.strict {
            return inner.invoke_with_args(args);
        }
        let rows = args.number_rows;
        if args
            .args
            .iter()
            .any(|a| matches!(a, ColumnarValue::Scalar(s) if s.is_null()))
        {
            return Ok(ColumnarValue::Scalar(ScalarValue::try_from(
                args.return_field.data_type(),
            )?));
        }
        let nulls = args.args.iter().fold(None, |acc, a| match a {
            ColumnarValue::Array(a) => {
                arrow::buffer::NullBuffer::union(acc.as_ref(), a.logical_nulls().as_ref())
            }
            ColumnarValue::Scalar(_) => acc,
        });
        let out = inner.invoke_with_args(args)?;
        let Some(nulls) = nulls else {
            return Ok(out);
        };
        let out = out.into_array(rows)?;
        let merged = arrow::buffer::NullBuffer::union(Some(&nulls), out.logical_nulls().as_ref());
        let data = out.to_data().into_builder().nulls(merged).build()?;
        Ok(ColumnarValue::Array(arrow::array::make_array(data)))
    }
}

/// A function computed value by value: `f` sees one row's arguments (never NULL: a row with a
/// NULL argument is NULL) and gives its value, of the type `returns` names. For the functions
/// whose work per row outweighs reading the row.
pub(crate) fn per_row(
    name: &'static str,
    coerce: impl Fn(&[DataType]) -> Result<Vec<DataType>> + Send + Sync + 'static,
    returns: impl Fn(&[DataType]) -> Result<DataType> + Send + Sync + 'static,
    f: impl Fn(&[ScalarValue]) -> Result<ScalarValue> + Send + Sync + 'static,
) -> Scalar {
    Scalar::new(name, coerce, returns, move |args, ty| {
        let rows = args.first().map_or(1, |a| a.len());
        let mut out = Vec::with_capacity(rows);
        let mut row = Vec::with_capacity(args.len());
        for i in 0..rows {
            row.clear();
            for a in args {
                row.push(ScalarValue::try_from_array(a, i)?);
            }
            out.push(if row.iter().any(ScalarValue::is_null) {
                ScalarValue::try_from(ty)?
            } else {
                f(&row)?
            });
        }
        if out.is_empty() {
            return Ok(arrow::array::new_empty_array(ty));
        }
        ScalarValue::iter_to_array(out)
    })
}

pub(crate) fn is_binary(t: &DataType) -> bool {
    matches!(
        t,
        DataType::Binary | DataType::LargeBinary | DataType::BinaryView | DataType::Null
    )
}

/// The digits of a second's fraction that a time unit holds.
fn precision(unit: &TimeUnit) -> u8 {
    match unit {
        TimeUnit::Second => 0,
        TimeUnit::Millisecond => 3,
        TimeUnit::Microsecond => 6,
        TimeUnit::Nanosecond => 9,
    }
}
