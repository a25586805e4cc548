//! `avg` of an integer or `numeric` argument as PostgreSQL types and rounds it (docs, 9.21
//! "Aggregate Functions": `avg(smallint | integer | bigint | numeric)` is `numeric`;
//! `int8_avg` / `numeric_avg` in `numeric.c`):
//!
//! ```text
//!  avg(smallint | integer | bigint) -> numeric   sum / count, rounded half away from zero
//!  avg(numeric(p, s))               -> numeric   the same, max(16, s) decimals
//! ```
//!
//! DataFusion's `avg` of an integer column is `double precision`, and of a decimal column a
//! decimal of 4 more decimals, truncated (`avg` of 1.00, 2.00, 2.00 was 1.666666 where
//! PostgreSQL gives 1.6666666666666667). PostgreSQL divides the exact sum by the count with
//! `select_div_scale`, whose scale gives at least 16 significant digits (16 decimals for most
//! averages from 1 up to 10,000; 20 below 1 or when the sum's leading base-10,000 digit does
//! not exceed the count's; fewer above). An Arrow decimal column has one scale, so Weir keeps
//! [`AVG_SCALE`] = 16 decimals for every value: the text
//! PostgreSQL prints for averages in that common range, and the same numeric value (to 16
//! decimals) elsewhere; a `numeric` average keeps its argument's decimals when it has more
//! than 16, as PostgreSQL's does. [`PgIntAvg`] keeps the exact sum (so batch queries, window
//! frames and views, whose aggregates keep the same sum and count in their state tables,
//! agree, and a retraction leaves no residue); [`crate::sql::semantics::PgSumTypes`] puts it
//! in place of `avg` for integer and `numeric` arguments.

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, Decimal128Array, Int64Array};
use arrow::datatypes::{DataType, Decimal128Type, Field, FieldRef, Int64Type, i256};
use datafusion::common::ScalarValue;
use datafusion::logical_expr::function::{AccumulatorArgs, StateFieldsArgs};
use datafusion::logical_expr::utils::format_state_name;
use datafusion::logical_expr::{Accumulator, AggregateUDFImpl, Signature, Volatility};

use crate::sql::semantics::div_round;

/// The decimals of an integer average (see the module docs).
pub const AVG_SCALE: i8 = 16;

/// The result type of [`PgIntAvg`]: `numeric` of 38 digits, [`AVG_SCALE`] decimals.
pub const AVG_TYPE: DataType = DataType::Decimal128(38, AVG_SCALE);

/// The decimals of the average of `numeric` values of `input_scale` decimals (0 for
/// integers): [`AVG_SCALE`], or the argument's when it has more.
pub fn avg_scale(input_scale: i8) -> i8 {
    input_scale.max(AVG_SCALE)
}

/// `avg` over `smallint`, `integer` or `bigint` (`Int16`, `Int32`, `Int64`; smaller integers
/// widen), result [`AVG_TYPE`], or over `numeric(p, s)` (`Decimal128(p, s)`), result
/// `Decimal128(38, avg_scale(s))`. State: the count of non-NULL values (`Int64`) and their
/// exact sum (`Decimal128(38, s)`, `s` = 0 for integers: the sum of up to 2^64 bigints
/// fits). Errors: 22003 `numeric field overflow` when a `numeric` sum or average passes 38
/// digits.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct PgIntAvg {
    signature: Signature,
}

impl PgIntAvg {
    /// The aggregate, for integer and `numeric` arguments.
    pub fn new() -> Self {
        PgIntAvg {
            signature: Signature::user_defined(Volatility::Immutable),
        }
    }
}

impl Default for PgIntAvg {
    fn default() -> Self {
        Self::new()
    }
}

impl AggregateUDFImpl for PgIntAvg {
    fn name(&self) -> &str {
        "avg"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn coerce_types(&self, arg_types: &[DataType]) -> datafusion::common::Result<Vec<DataType>> {
        let t = match arg_types {
            [DataType::Int8 | DataType::UInt8 | DataType::Int16] => DataType::Int16,
            [DataType::UInt16 | DataType::Int32] => DataType::Int32,
            [DataType::UInt32 | DataType::Int64] => DataType::Int64,
            [t @ DataType::Decimal128(_, _)] => t.clone(),
            _ => {
                return Err(datafusion::common::DataFusionError::Plan(format!(
                    "avg over {arg_types:?}: this average takes one integer or numeric argument"
                )));
            }
        };
        Ok(vec![t])
    }

    fn return_type(&self, arg_types: &[DataType]) -> datafusion::common::Result<DataType> {
        Ok(match arg_types {
            [DataType::Decimal128(_, s)] => DataType::Decimal128(38, avg_scale(*s)),
            _ => AVG_TYPE,
        })
    }

    fn accumulator(
        &self,
        args: AccumulatorArgs<'_>,
    ) -> datafusion::common::Result<Box<dyn Accumulator>> {
        if args.is_distinct {
            return Err(datafusion::common::DataFusionError::NotImplemented(
                "avg(DISTINCT integer)".into(),
            ));
        }
        let (sum_scale, scale) = scales(args.expr_fields.first().map(|f| f.data_type()));
        Ok(Box::new(IntAvg {
            n: 0,
            sum: 0,
            sum_scale,
            scale,
            sum_of: None,
        }))
    }

    fn state_fields(&self, args: StateFieldsArgs<'_>) -> datafusion::common::Result<Vec<FieldRef>> {
        Ok(sum_state_fields(args))
    }
}

/// The precision DataFusion gives the sum of `numeric(p, s)` values: p + 10, at most 38.
pub fn sum_precision(p: u8) -> u8 {
    p.saturating_add(10).min(38)
}

/// `sum` over `numeric(p, s)` (`Decimal128(p, s)`), result `Decimal128(sum_precision(p), s)`
/// as DataFusion types it, but exact and checked (PostgreSQL's `sum(numeric)` never wraps;
/// DataFusion's wrapped two 38-digit values around to a negative sum). State as
/// [`PgIntAvg`]'s; a value taken out again leaves no residue.
///
/// Errors: 22003 `numeric field overflow` when the sum passes 38 digits.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct PgNumericSum {
    signature: Signature,
}

impl PgNumericSum {
    /// The aggregate, for `numeric` arguments.
    pub fn new() -> Self {
        PgNumericSum {
            signature: Signature::user_defined(Volatility::Immutable),
        }
    }
}

impl Default for PgNumericSum {
    fn default() -> Self {
        Self::new()
    }
}

impl AggregateUDFImpl for PgNumericSum {
    fn name(&self) -> &str {
        "sum"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn coerce_types(&self, arg_types: &[DataType]) -> datafusion::common::Result<Vec<DataType>> {
        match arg_types {
            [t @ DataType::Decimal128(_, _)] => Ok(vec![t.clone()]),
            _ => Err(datafusion::common::DataFusionError::Plan(format!(
                "sum over {arg_types:?}: this sum takes one numeric argument"
            ))),
        }
    }

    fn return_type(&self, arg_types: &[DataType]) -> datafusion::common::Result<DataType> {
        match arg_types {
            [DataType::Decimal128(p, s)] => Ok(DataType::Decimal128(sum_precision(*p), *s)),
            _ => self.coerce_types(arg_types).map(|_| DataType::Null),
        }
    }

    fn accumulator(
        &self,
        args: AccumulatorArgs<'_>,
    ) -> datafusion::common::Result<Box<dyn Accumulator>> {
        if args.is_distinct {
            return Err(datafusion::common::DataFusionError::NotImplemented(
                "sum(DISTINCT numeric)".into(),
            ));
        }
        let (p, s) = match args.expr_fields.first().map(|f| f.data_type()) {
            Some(DataType::Decimal128(p, s)) => (*p, *s),
            _ => (38, 0),
        };
        Ok(Box::new(IntAvg {
            n: 0,
            sum: 0,
            sum_scale: s,
            scale: s,
            sum_of: Some(sum_precision(p)),
        }))
    }

    fn state_fields(&self, args: StateFieldsArgs<'_>) -> datafusion::common::Result<Vec<FieldRef>> {
        Ok(sum_state_fields(args))
    }
}

/// The state of [`PgIntAvg`] and [`PgNumericSum`]: the count (`Int64`) and the exact sum
/// (`Decimal128(38, s)`, the argument's decimals).
fn sum_state_fields(args: StateFieldsArgs<'_>) -> Vec<FieldRef> {
    let sum_scale = scales(args.input_fields.first().map(|f| f.data_type())).0;
    vec![
        Arc::new(Field::new(
            format_state_name(args.name, "count"),
            DataType::Int64,
            true,
        )),
        Arc::new(Field::new(
            format_state_name(args.name, "sum"),
            DataType::Decimal128(38, sum_scale),
            true,
        )),
    ]
}

/// The decimals of the sum (the argument's) and of the average, for an argument of type `t`.
fn scales(t: Option<&DataType>) -> (i8, i8) {
    match t {
        Some(DataType::Decimal128(_, s)) => (*s, avg_scale(*s)),
        _ => (0, AVG_SCALE),
    }
}

/// The average of `n` integers whose sum is `sum`, in units of 10^-[`AVG_SCALE`], rounded
/// half away from zero as PostgreSQL's numeric division rounds; `None` for no values (NULL).
/// Views' aggregates evaluate their averages with it too.
pub fn int_avg_value(n: i64, sum: i128) -> Option<i128> {
    // |sum| < 2^127 and 10^16 < 2^54: the product fits in 256 bits; |average| ≤ 2^63, so
    // the quotient fits in 38 digits.
    avg_value(n, sum, 0, AVG_SCALE).ok().flatten()
}

/// The average of `n` values whose exact sum is `sum` in units of 10^-`sum_scale`, in units
/// of 10^-`scale` (`scale` ≥ `sum_scale`): the quotient rounded half away from zero to the
/// decimals PostgreSQL's numeric division gives it (`select_div_scale`, see
/// [`crate::sql::semantics::pg_div_scale`]: at least 16 significant digits, so an average of
/// 19 integer digits has none: 4611686018427387903.5 is 4611686018427387904), at most
/// `scale`, then held at `scale`; `None` for no values (NULL). Views' aggregates evaluate
/// their averages with it too.
///
/// # Errors
/// 22003 `numeric field overflow` when the average has more than 38 digits.
pub fn avg_value(
    n: i64,
    sum: i128,
    sum_scale: i8,
    scale: i8,
) -> crate::error::Result<Option<i128>> {
    if n <= 0 {
        return Ok(None);
    }
    let overflow = || crate::error::Error::data("22003", "numeric field overflow");
    let rounding =
        crate::sql::semantics::pg_div_scale(sum, sum_scale, sum_scale, i128::from(n), 0, 0)
            .clamp(i32::from(sum_scale), i32::from(scale));
    let pow = |k: i32| -> crate::error::Result<i256> {
        i256::from_i128(10)
            .checked_pow(u32::try_from(k).map_err(|_| overflow())?)
            .ok_or_else(overflow)
    };
    // |sum| < 10^38 and the shift ≤ 38: the product fits in 256 bits.
    let num = i256::from_i128(sum)
        .checked_mul(pow(rounding - i32::from(sum_scale))?)
        .ok_or_else(overflow)?;
    let q = div_round(num, i256::from_i128(i128::from(n))).ok_or_else(overflow)?;
    let q = q
        .checked_mul(pow(i32::from(scale) - rounding)?)
        .ok_or_else(overflow)?;
    let q = q.to_i128().ok_or_else(overflow)?;
    if q.unsigned_abs() >= 10u128.pow(38) {
        return Err(overflow());
    }
    Ok(Some(q))
}

/// The sum of `n` values whose exact sum is `sum`; `None` for no values (NULL). Views'
/// aggregates evaluate their `numeric` sums with it too.
///
/// # Errors
/// 22003 `numeric field overflow` when the sum has more than 38 digits (more than its type's
/// precision, `p + 10` of the argument's, is held and shown as it is, as before).
pub fn sum_value(n: i64, sum: i128) -> crate::error::Result<Option<i128>> {
    if n <= 0 {
        return Ok(None);
    }
    if sum.unsigned_abs() >= 10u128.pow(38) {
        return Err(crate::error::Error::data("22003", "numeric field overflow"));
    }
    Ok(Some(sum))
}

/// 22003 `numeric field overflow`, as it crosses DataFusion.
fn numeric_overflow() -> datafusion::common::DataFusionError {
    datafusion::common::DataFusionError::External(Box::new(crate::error::Error::data(
        "22003",
        "numeric field overflow",
    )))
}

/// One group's average: the count of non-NULL values and their exact sum.
#[derive(Debug)]
struct IntAvg {
    n: i64,
    /// In units of 10^-`sum_scale`.
    sum: i128,
    /// The argument's decimals (0 for integers).
    sum_scale: i8,
    /// The average's decimals.
    scale: i8,
    /// `Some(precision)`: the accumulator gives the sum, of that precision, not the average.
    sum_of: Option<u8>,
}

impl IntAvg {
    /// Adds (`weight` 1) or retracts (-1) the non-NULL values of `values`.
    fn apply(&mut self, values: &ArrayRef, weight: i64) -> datafusion::common::Result<()> {
        if let DataType::Decimal128(_, _) = values.data_type() {
            // The raw values are in units of the argument's scale, the sum's.
            let values = values.as_primitive::<Decimal128Type>();
            for i in 0..values.len() {
                if values.is_valid(i) {
                    self.sum = values
                        .value(i)
                        .checked_mul(weight as i128)
                        .and_then(|v| self.sum.checked_add(v))
                        .filter(|s| s.unsigned_abs() < 10u128.pow(38))
                        .ok_or_else(numeric_overflow)?;
                    self.n += weight;
                }
            }
            return Ok(());
        }
        let values = arrow::compute::cast(values, &DataType::Int64)?;
        let values = values.as_primitive::<Int64Type>();
        for i in 0..values.len() {
            if values.is_valid(i) {
                self.sum += values.value(i) as i128 * weight as i128;
                self.n += weight;
            }
        }
        Ok(())
    }
}

impl Accumulator for IntAvg {
    fn update_batch(&mut self, values: &[ArrayRef]) -> datafusion::common::Result<()> {
        self.apply(&values[0], 1)
    }

    fn retract_batch(&mut self, values: &[ArrayRef]) -> datafusion::common::Result<()> {
        self.apply(&values[0], -1)
    }

    fn supports_retract_batch(&self) -> bool {
        true
    }

    fn evaluate(&mut self) -> datafusion::common::Result<ScalarValue> {
        if let Some(p) = self.sum_of {
            let value = sum_value(self.n, self.sum)
                .map_err(|e| datafusion::common::DataFusionError::External(Box::new(e)))?;
            return Ok(ScalarValue::Decimal128(value, p, self.sum_scale));
        }
        let value = avg_value(self.n, self.sum, self.sum_scale, self.scale)
            .map_err(|e| datafusion::common::DataFusionError::External(Box::new(e)))?;
        Ok(ScalarValue::Decimal128(value, 38, self.scale))
    }

    fn size(&self) -> usize {
        std::mem::size_of_val(self)
    }

    fn state(&mut self) -> datafusion::common::Result<Vec<ScalarValue>> {
        Ok(vec![
            ScalarValue::Int64(Some(self.n)),
            ScalarValue::Decimal128(Some(self.sum), 38, self.sum_scale),
        ])
    }

    fn merge_batch(&mut self, states: &[ArrayRef]) -> datafusion::common::Result<()> {
        let n: &Int64Array = states[0].as_primitive();
        let sums: &Decimal128Array = states[1].as_primitive::<Decimal128Type>();
        for i in 0..n.len() {
            if n.is_null(i) || sums.is_null(i) {
                continue;
            }
            self.sum = self
                .sum
                .checked_add(sums.value(i))
                .filter(|s| s.unsigned_abs() < 10u128.pow(38))
                .ok_or_else(numeric_overflow)?;
            self.n += n.value(i);
        }
        Ok(())
    }
}

/// `avg` as Weir registers it, under PostgreSQL's name and DataFusion's alias `mean`: an
/// integer or `numeric` argument is averaged by [`PgIntAvg`] (result `numeric`, so
/// `round(avg(i), 2)` resolves as in PostgreSQL, where `avg(integer)` typed as `double
/// precision` would find no `round(double precision, integer)`), `avg(DISTINCT ...)` of one
/// by [`DistinctAvg`]; `real`, `double precision` and interval arguments by DataFusion's
/// `avg` (result `double precision`, or the interval's type). Errors: 42883 for an argument
/// of another type; 22003 as [`PgIntAvg`].
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct PgAvg {
    float: Arc<datafusion::logical_expr::AggregateUDF>,
    exact: PgIntAvg,
    aliases: Vec<String>,
}

impl PgAvg {
    /// The aggregate, in place of DataFusion's `avg`.
    pub fn new() -> Self {
        PgAvg {
            float: datafusion::functions_aggregate::average::avg_udaf(),
            exact: PgIntAvg::new(),
            aliases: vec!["mean".into()],
        }
    }
}

impl Default for PgAvg {
    fn default() -> Self {
        Self::new()
    }
}

/// Whether `avg` of a (coerced) argument of type `t` is exact: integers and `numeric`.
pub fn exact_avg(t: Option<&DataType>) -> bool {
    matches!(
        t,
        Some(
            DataType::Int8
                | DataType::Int16
                | DataType::Int32
                | DataType::Int64
                | DataType::UInt8
                | DataType::UInt16
                | DataType::UInt32
                | DataType::Decimal128(_, _)
        )
    )
}

impl AggregateUDFImpl for PgAvg {
    fn name(&self) -> &str {
        "avg"
    }

    fn aliases(&self) -> &[String] {
        &self.aliases
    }

    fn signature(&self) -> &Signature {
        &self.exact.signature
    }

    fn coerce_types(&self, arg_types: &[DataType]) -> datafusion::common::Result<Vec<DataType>> {
        match arg_types {
            [t] if exact_avg(Some(t)) => self.exact.coerce_types(arg_types),
            [DataType::Float16 | DataType::Float32 | DataType::Float64 | DataType::Null] => {
                Ok(vec![DataType::Float64])
            }
            [t @ DataType::Duration(_)] => Ok(vec![t.clone()]),
            _ => Err(crate::sql::functions::math::no_function("avg", arg_types)),
        }
    }

    fn return_type(&self, arg_types: &[DataType]) -> datafusion::common::Result<DataType> {
        if exact_avg(arg_types.first()) {
            self.exact.return_type(arg_types)
        } else {
            self.float.inner().return_type(arg_types)
        }
    }

    fn accumulator(
        &self,
        args: AccumulatorArgs<'_>,
    ) -> datafusion::common::Result<Box<dyn Accumulator>> {
        let t = args.expr_fields.first().map(|f| f.data_type());
        if !exact_avg(t) {
            return self.float.inner().accumulator(args);
        }
        if args.is_distinct {
            let (sum_scale, scale) = scales(t);
            return Ok(Box::new(DistinctAvg {
                values: Default::default(),
                sum_scale,
                scale,
            }));
        }
        self.exact.accumulator(args)
    }

    fn state_fields(&self, args: StateFieldsArgs<'_>) -> datafusion::common::Result<Vec<FieldRef>> {
        let t = args.input_fields.first().map(|f| f.data_type());
        if !exact_avg(t) {
            return self.float.inner().state_fields(args);
        }
        if args.is_distinct {
            let sum_scale = scales(t).0;
            return Ok(vec![Arc::new(Field::new_list(
                format_state_name(args.name, "avg distinct"),
                Field::new_list_field(DataType::Decimal128(38, sum_scale), true),
                false,
            ))]);
        }
        self.exact.state_fields(args)
    }

    fn groups_accumulator_supported(&self, args: AccumulatorArgs<'_>) -> bool {
        !exact_avg(args.expr_fields.first().map(|f| f.data_type()))
            && self.float.inner().groups_accumulator_supported(args)
    }

    fn create_groups_accumulator(
        &self,
        args: AccumulatorArgs<'_>,
    ) -> datafusion::common::Result<Box<dyn datafusion::logical_expr::GroupsAccumulator>> {
        self.float.inner().create_groups_accumulator(args)
    }

    /// A window frame that slides retracts the rows leaving it; the average of floats does
    /// so over an exact sum ([`crate::sql::functions::float_sum::float_avg_accumulator`]),
    /// where DataFusion's running sum kept a residue.
    fn create_sliding_accumulator(
        &self,
        args: AccumulatorArgs<'_>,
    ) -> datafusion::common::Result<Box<dyn Accumulator>> {
        let t = args.expr_fields.first().map(|f| f.data_type());
        if !args.is_distinct
            && matches!(
                t,
                Some(DataType::Float16 | DataType::Float32 | DataType::Float64)
            )
        {
            return Ok(crate::sql::functions::float_sum::float_avg_accumulator());
        }
        self.accumulator(args)
    }

    fn reverse_expr(&self) -> datafusion::logical_expr::ReversedUDAF {
        datafusion::logical_expr::ReversedUDAF::Identical
    }
}

/// `avg(DISTINCT x)` of integers or `numeric(p, s)`: the distinct non-NULL values (in units
/// of 10^-s, `s` = 0 for integers), averaged as [`PgIntAvg`] averages (result `numeric` of
/// 38 digits, `avg_scale(s)` decimals). State: the distinct values, a list of
/// `Decimal128(38, s)`.
#[derive(Debug)]
struct DistinctAvg {
    values: std::collections::HashSet<i128>,
    sum_scale: i8,
    scale: i8,
}

impl DistinctAvg {
    /// Adds the non-NULL values of `values` (integers or `numeric`).
    fn add(&mut self, values: &ArrayRef) -> datafusion::common::Result<()> {
        let values = arrow::compute::cast(values, &DataType::Decimal128(38, self.sum_scale))?;
        let values = values.as_primitive::<Decimal128Type>();
        self.values.extend(values.iter().flatten());
        Ok(())
    }
}

impl Accumulator for DistinctAvg {
    fn update_batch(&mut self, values: &[ArrayRef]) -> datafusion::common::Result<()> {
        self.add(&values[0])
    }

    fn evaluate(&mut self) -> datafusion::common::Result<ScalarValue> {
        let mut sum: i128 = 0;
        for v in &self.values {
            sum = sum
                .checked_add(*v)
                .filter(|s| s.unsigned_abs() < 10u128.pow(38))
                .ok_or_else(numeric_overflow)?;
        }
        let value = avg_value(self.values.len() as i64, sum, self.sum_scale, self.scale)
            .map_err(|e| datafusion::common::DataFusionError::External(Box::new(e)))?;
        Ok(ScalarValue::Decimal128(value, 38, self.scale))
    }

    fn size(&self) -> usize {
        std::mem::size_of_val(self) + self.values.capacity() * std::mem::size_of::<i128>()
    }

    fn state(&mut self) -> datafusion::common::Result<Vec<ScalarValue>> {
        let values: Vec<ScalarValue> = self
            .values
            .iter()
            .map(|v| ScalarValue::Decimal128(Some(*v), 38, self.sum_scale))
            .collect();
        Ok(vec![ScalarValue::List(ScalarValue::new_list_nullable(
            &values,
            &DataType::Decimal128(38, self.sum_scale),
        ))])
    }

    fn merge_batch(&mut self, states: &[ArrayRef]) -> datafusion::common::Result<()> {
        let lists = states[0].as_list::<i32>();
        for list in lists.iter().flatten() {
            self.add(&list)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::Int32Array;
    use arrow::datatypes::DecimalType;

    fn text(v: Option<i128>) -> String {
        v.map(|v| Decimal128Type::format_decimal(v, 38, AVG_SCALE))
            .unwrap_or_else(|| "NULL".into())
    }

    #[test]
    fn averages_round_half_away_from_zero_at_16_decimals() {
        // PostgreSQL 15: avg of (1, 2) is 1.5000000000000000; of (1, 2, 2) 1.6666666666666667;
        // of (-1, -2, -2) -1.6666666666666667.
        assert_eq!(text(int_avg_value(2, 3)), "1.5000000000000000");
        assert_eq!(text(int_avg_value(3, 5)), "1.6666666666666667");
        assert_eq!(text(int_avg_value(3, -5)), "-1.6666666666666667");
        assert_eq!(text(int_avg_value(0, 0)), "NULL");
        // PostgreSQL's numeric division keeps about 16 significant digits: an average of 19
        // integer digits has no decimals (PostgreSQL 15: 9223372036854775807::numeric / 2 is
        // 4611686018427387904), one of 15 has 4 (1000000000000001::numeric / 3 is
        // 333333333333333.6667), shown here at 16 decimals.
        assert_eq!(
            text(int_avg_value(2, i128::from(i64::MAX))),
            "4611686018427387904.0000000000000000"
        );
        assert_eq!(
            text(int_avg_value(3, 1_000_000_000_000_001)),
            "333333333333333.6667000000000000"
        );
        // Two bigints of 2^63 - 1: the sum passes 2^64, the average is exact.
        let max = i64::MAX as i128;
        assert_eq!(
            text(int_avg_value(2, 2 * max)),
            "9223372036854775807.0000000000000000"
        );
    }

    #[test]
    fn numeric_averages_keep_16_decimals_or_the_arguments() {
        // PostgreSQL 15: avg(x) of numeric(10,2) 1.00, 2.00, 2.00 is 1.6666666666666667;
        // of 1, 2.5, 0.125 (sum 3.625) 1.2083333333333333 (16 decimals: select_div_scale
        // for quotients from 1 up); of 20-decimal values the argument's 20 decimals.
        let mut a = IntAvg {
            n: 0,
            sum: 0,
            sum_scale: 2,
            scale: avg_scale(2),
            sum_of: None,
        };
        let x = Decimal128Array::from(vec![Some(100), Some(200), None, Some(200)])
            .with_precision_and_scale(10, 2)
            .unwrap();
        a.update_batch(&[Arc::new(x)]).unwrap();
        let ScalarValue::Decimal128(v, 38, 16) = a.evaluate().unwrap() else {
            panic!("not numeric(38, 16)");
        };
        assert_eq!(text(v), "1.6666666666666667");
        assert_eq!(
            text(avg_value(3, 3625, 3, avg_scale(3)).unwrap()),
            "1.2083333333333333"
        );
        // 0.00000000000000000001 and 0.00000000000000000002: 0.000000000000000000015 → 2.
        assert_eq!(avg_value(2, 3, 20, avg_scale(20)).unwrap(), Some(2));
        assert_eq!(avg_scale(20), 20);
        // An average past 38 digits is 22003, not a wrong value.
        let e = avg_value(1, 10i128.pow(37), 0, AVG_SCALE).unwrap_err();
        assert_eq!(e.sqlstate(), "22003");
    }

    #[test]
    fn numeric_sums_fail_past_38_digits_instead_of_wrapping() {
        let nines = 10i128.pow(38) - 1;
        let mut a = IntAvg {
            n: 0,
            sum: 0,
            sum_scale: 0,
            scale: 0,
            sum_of: Some(38),
        };
        let x = || {
            Arc::new(
                Decimal128Array::from(vec![Some(nines), None])
                    .with_precision_and_scale(38, 0)
                    .unwrap(),
            ) as ArrayRef
        };
        a.update_batch(&[x()]).unwrap();
        assert_eq!(
            a.evaluate().unwrap(),
            ScalarValue::Decimal128(Some(nines), 38, 0)
        );
        // 2 × (10^38 - 1) fits in an i128 but not in 38 digits; DataFusion's sum wrapped
        // such sums around to negative numbers.
        let e = a.update_batch(&[x()]).unwrap_err();
        assert!(e.to_string().contains("numeric field overflow"), "{e}");
        // Retracted to nothing: NULL, as a sum over no rows.
        let mut b = IntAvg {
            n: 0,
            sum: 0,
            sum_scale: 2,
            scale: 2,
            sum_of: Some(20),
        };
        let y = Arc::new(
            Decimal128Array::from(vec![150, -25])
                .with_precision_and_scale(10, 2)
                .unwrap(),
        ) as ArrayRef;
        b.update_batch(std::slice::from_ref(&y)).unwrap();
        assert_eq!(
            b.evaluate().unwrap(),
            ScalarValue::Decimal128(Some(125), 20, 2)
        );
        b.retract_batch(&[y]).unwrap();
        assert_eq!(b.evaluate().unwrap(), ScalarValue::Decimal128(None, 20, 2));
        assert_eq!(sum_precision(10), 20);
        assert_eq!(sum_precision(30), 38);
    }

    #[test]
    fn retraction_and_merge_keep_the_exact_sum() {
        let mut a = IntAvg {
            n: 0,
            sum: 0,
            sum_scale: 0,
            scale: AVG_SCALE,
            sum_of: None,
        };
        a.update_batch(&[Arc::new(Int32Array::from(vec![
            Some(1),
            None,
            Some(2),
            Some(9),
        ]))])
        .unwrap();
        a.retract_batch(&[Arc::new(Int32Array::from(vec![9]))])
            .unwrap();
        let mut b = IntAvg {
            n: 0,
            sum: 0,
            sum_scale: 0,
            scale: AVG_SCALE,
            sum_of: None,
        };
        b.update_batch(&[Arc::new(Int64Array::from(vec![i64::MAX, i64::MAX]))])
            .unwrap();
        let state = b.state().unwrap();
        let arrays: Vec<ArrayRef> = state.iter().map(|s| s.to_array().unwrap()).collect();
        a.merge_batch(&arrays).unwrap();
        // (1 + 2 + 2 (2^63 - 1)) / 4 = 4611686018427387904.25, which PostgreSQL 15 rounds to
        // 4611686018427387904 (19 integer digits leave no decimals, `select_div_scale`).
        let expected = 4_611_686_018_427_387_904i128 * 10i128.pow(16);
        assert_eq!(
            a.evaluate().unwrap(),
            ScalarValue::Decimal128(Some(expected), 38, AVG_SCALE)
        );
    }
}
