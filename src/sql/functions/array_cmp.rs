//! PostgreSQL's array ordering and containment operators, where DataFusion's differ.
//!
//! ```text
//!  array_lt(a, b), array_le, array_gt, array_ge   a < b, a <= b, a > b, a >= b   boolean
//!  arraycontains(a, b)                            a @> b (and b <@ a)            boolean
//! ```
//!
//! PostgreSQL compares arrays element by element in storage order (row-major), a NULL element
//! sorting after every value and equal to another NULL; when one array runs out first it is
//! the smaller, and arrays with the same elements are ordered by their dimensions
//! (`array_cmp` in PostgreSQL's `arrayfuncs.c`; docs 9.19 "Array Functions and Operators").
//! DataFusion's list comparison puts NULL elements first, so `array[1, NULL] < array[1, 2]` was
//! true (PostgreSQL: false).
//!
//! `a @> b` is true when every element of `b` equals some element of `a`, whatever the
//! dimensions of either (`array[[1,2],[3,4]] @> array[4]`), and a NULL element never matches
//! anything, so `array[1, NULL] @> array[NULL::int]` is false (`array_contain_compare`).
//! DataFusion's `array_has_all` matched NULL with NULL and compared nested arrays as wholes.
//!
//! Elements compare as PostgreSQL's `=` and `<` do: `-0` equals `0`, NaN equals NaN and sorts
//! above every number, an interval is its length with a month of 30 days
//! ([`crate::sql::semantics::comparable`]). Either array NULL gives NULL.

use std::cmp::Ordering;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, BooleanArray, make_comparator};
use arrow::compute::SortOptions;
use arrow::datatypes::{DataType, Field};
use datafusion::common::{DataFusionError, Result};
use datafusion::logical_expr::{
    ColumnarValue, Operator, ScalarFunctionArgs, ScalarUDFImpl, Signature, Volatility,
};

use crate::error::Error;
use crate::sql::semantics::{comparable, ours, shape_result};

/// One of `<`, `<=`, `>`, `>=` between two arrays of the same element type and the same
/// number of dimensions, by PostgreSQL's order (see the module docs): a `boolean`. Also
/// `=`, `<>`, `IS DISTINCT FROM` and `IS NOT DISTINCT FROM`, which the analyzer gives this
/// for arrays of floats and intervals only (`array['-0'::float8] = array[0::float8]`,
/// `array[interval '1 day'] = array[interval '24 hours']` are true; DataFusion compared the
/// bits), so that other arrays' equalities stay join keys.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct ArrayOrder {
    signature: Signature,
    op: Operator,
}

impl ArrayOrder {
    /// The function for `op`; `None` for an operator that is no comparison.
    pub fn new(op: Operator) -> Option<Self> {
        crate::sql::equal_keys::is_comparison(op).then(|| ArrayOrder {
            signature: Signature::user_defined(Volatility::Immutable),
            op,
        })
    }
}

impl ScalarUDFImpl for ArrayOrder {
    fn name(&self) -> &str {
        match self.op {
            Operator::Lt => "array_lt",
            Operator::LtEq => "array_le",
            Operator::Gt => "array_gt",
            Operator::GtEq => "array_ge",
            Operator::Eq => "array_eq",
            Operator::NotEq => "array_ne",
            Operator::IsDistinctFrom => "array_is_distinct_from",
            _ => "array_is_not_distinct_from",
        }
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[DataType]) -> Result<DataType> {
        Ok(DataType::Boolean)
    }

    /// Both arrays with the elements' common type.
    ///
    /// # Errors
    /// `42883` when the element types have no common type; `0A000` for arrays of different
    /// numbers of dimensions, which Weir's array types keep apart.
    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        let [a, b] = arg_types else {
            return Err(DataFusionError::Plan(format!(
                "{} takes two arrays",
                self.name()
            )));
        };
        if depth(a) != depth(b) && !a.is_null() && !b.is_null() {
            return Err(ours(Error::plan(
                "0A000",
                format!(
                    "comparing arrays of different numbers of dimensions is not supported ({} {} {})",
                    crate::sql::functions::pg_type_name(a),
                    self.op,
                    crate::sql::functions::pg_type_name(b)
                ),
            )));
        }
        common_element_types(a, b, &self.op.to_string())
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let distinct = matches!(
            self.op,
            Operator::IsDistinctFrom | Operator::IsNotDistinctFrom
        );
        each_row(&args, |row| {
            match (row.a_null, row.b_null) {
                (false, false) => {}
                (x, y) if distinct => {
                    return Some((x != y) == (self.op == Operator::IsDistinctFrom));
                }
                _ => return None,
            }
            let order = row
                .ra
                .clone()
                .zip(row.rb.clone())
                .map(|(x, y)| row.cmp.compare(x, y))
                .find(|o| o.is_ne())
                .unwrap_or_else(|| {
                    row.ra
                        .len()
                        .cmp(&row.rb.len())
                        .then_with(|| row.dims_a().cmp(&row.dims_b()))
                });
            Some(match self.op {
                Operator::Lt => order.is_lt(),
                Operator::LtEq => order.is_le(),
                Operator::Gt => order.is_gt(),
                Operator::GtEq => order.is_ge(),
                Operator::Eq | Operator::IsNotDistinctFrom => order.is_eq(),
                _ => order.is_ne(),
            })
        })
    }
}

/// The name of [`ArrayContains`], PostgreSQL's name of the function behind `@>`.
pub const ARRAY_CONTAINS_FUNCTION: &str = "arraycontains";

/// `arraycontains(a, b)`: `a @> b` by PostgreSQL's rule (see the module docs), a `boolean`;
/// `b <@ a` is the same call (the parser writes both operators as calls of it).
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct ArrayContains {
    signature: Signature,
}

impl Default for ArrayContains {
    fn default() -> Self {
        ArrayContains {
            signature: Signature::user_defined(Volatility::Immutable),
        }
    }
}

impl ScalarUDFImpl for ArrayContains {
    fn name(&self) -> &str {
        ARRAY_CONTAINS_FUNCTION
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[DataType]) -> Result<DataType> {
        Ok(DataType::Boolean)
    }

    /// Both arrays with the elements' common type, each keeping its dimensions.
    ///
    /// # Errors
    /// `42883` when the element types have no common type or an operand is no array.
    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        let [a, b] = arg_types else {
            return Err(DataFusionError::Plan("@> takes two arrays".into()));
        };
        common_element_types(a, b, "@>")
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        each_row(&args, |row| {
            if row.a_null || row.b_null {
                return None;
            }
            Some(row.rb.clone().all(|y| {
                !row.cmp.b.is_null(y)
                    && row
                        .ra
                        .clone()
                        .any(|x| !row.cmp.a.is_null(x) && row.cmp.compare(x, y).is_eq())
            }))
        })
    }
}

/// One row of a call over two array columns, as [`each_row`] hands it over: whether each
/// side is NULL, where the row's elements are in each side's leaves, and a comparator of
/// those leaves.
struct Row<'a> {
    i: usize,
    a: &'a ArrayRef,
    b: &'a ArrayRef,
    a_null: bool,
    b_null: bool,
    ra: std::ops::Range<usize>,
    rb: std::ops::Range<usize>,
    cmp: &'a LeafCmp<'a>,
}

impl Row<'_> {
    fn dims_a(&self) -> Vec<usize> {
        dims(self.a.as_ref(), self.i)
    }

    fn dims_b(&self) -> Vec<usize> {
        dims(self.b.as_ref(), self.i)
    }
}

/// `f` of each row of a call's two array arguments (columns or scalars), as a `boolean`
/// column, or a scalar when both arguments are.
///
/// # Errors
/// When the leaves of the two sides cannot be compared (types the planner did not coerce).
fn each_row(
    args: &ScalarFunctionArgs,
    f: impl Fn(Row<'_>) -> Option<bool>,
) -> Result<ColumnarValue> {
    let arrays = ColumnarValue::values_to_arrays(&args.args)?;
    let (a, b) = (&arrays[0], &arrays[1]);
    let (la, oa) = leaves(a)?;
    let (lb, ob) = leaves(b)?;
    let cmp = LeafCmp::new(&la, &lb)?;
    let out: BooleanArray = (0..a.len())
        .map(|i| {
            f(Row {
                i,
                a,
                b,
                a_null: a.is_null(i),
                b_null: b.is_null(i),
                ra: oa[i]..oa[i + 1],
                rb: ob[i]..ob[i + 1],
                cmp: &cmp,
            })
        })
        .collect();
    shape_result(&args.args, Arc::new(out))
}

/// Compares elements of two leaf arrays as PostgreSQL orders array elements: NULL after
/// every value, two NULLs equal.
struct LeafCmp<'a> {
    a: &'a ArrayRef,
    b: &'a ArrayRef,
    values: arrow::array::DynComparator,
}

impl<'a> LeafCmp<'a> {
    fn new(a: &'a ArrayRef, b: &'a ArrayRef) -> Result<Self> {
        let values = make_comparator(a.as_ref(), b.as_ref(), SortOptions::default())?;
        Ok(LeafCmp { a, b, values })
    }

    fn compare(&self, i: usize, j: usize) -> Ordering {
        match (self.a.is_null(i), self.b.is_null(j)) {
            (true, true) => Ordering::Equal,
            (true, false) => Ordering::Greater,
            (false, true) => Ordering::Less,
            (false, false) => (self.values)(i, j),
        }
    }
}

/// The innermost values of an array column (in the form [`comparable`] gives) and, for each
/// row, where its elements start and end in them (`n + 1` offsets for `n` rows). A row of a
/// NULL or empty array has no elements.
fn leaves(column: &ArrayRef) -> Result<(ArrayRef, Vec<usize>)> {
    let (values, outer): (ArrayRef, Vec<usize>) = match column.data_type() {
        DataType::List(_) => {
            let l = column.as_list::<i32>();
            (
                Arc::clone(l.values()),
                l.offsets().iter().map(|o| *o as usize).collect(),
            )
        }
        DataType::LargeList(_) => {
            let l = column.as_list::<i64>();
            (
                Arc::clone(l.values()),
                l.offsets().iter().map(|o| *o as usize).collect(),
            )
        }
        DataType::Null => return Ok((Arc::clone(column), vec![0; column.len() + 1])),
        other => {
            return Err(DataFusionError::Internal(format!(
                "an array operator got a {other}"
            )));
        }
    };
    if depth(values.data_type()) == 0 {
        return Ok((comparable(&values), outer));
    }
    let (leaves, inner) = leaves(&values)?;
    Ok((leaves, outer.into_iter().map(|o| inner[o]).collect()))
}

/// The lengths of row `i`'s array along each dimension (its first sub-array's for inner
/// ones), which order arrays whose elements are all equal.
fn dims(column: &dyn Array, i: usize) -> Vec<usize> {
    let mut out = Vec::new();
    let mut current: Option<ArrayRef> = match column.data_type() {
        DataType::List(_) => Some(column.as_list::<i32>().value(i)),
        DataType::LargeList(_) => Some(column.as_list::<i64>().value(i)),
        _ => None,
    };
    while let Some(a) = current {
        out.push(a.len());
        current = match a.data_type() {
            DataType::List(_) if !a.is_empty() => Some(a.as_list::<i32>().value(0)),
            DataType::LargeList(_) if !a.is_empty() => Some(a.as_list::<i64>().value(0)),
            _ => None,
        };
    }
    out
}

/// How many list types `t` nests (0 for a scalar type).
fn depth(t: &DataType) -> usize {
    match t {
        DataType::List(f) | DataType::LargeList(f) => 1 + depth(f.data_type()),
        _ => 0,
    }
}

/// The innermost element type of `t` (`t` itself when it is no array).
pub(crate) fn leaf(t: &DataType) -> &DataType {
    match t {
        DataType::List(f) | DataType::LargeList(f) => leaf(f.data_type()),
        other => other,
    }
}

/// `t` with `new` as its innermost element type (lists as `List`).
fn with_leaf(t: &DataType, new: &DataType) -> DataType {
    match t {
        DataType::List(f) | DataType::LargeList(f) => DataType::List(Arc::new(
            Field::new_list_field(with_leaf(f.data_type(), new), true),
        )),
        _ => new.clone(),
    }
}

/// `a` and `b` with their innermost elements of one type, each keeping its dimensions; a NULL
/// operand takes the other's type.
///
/// # Errors
/// `42883` naming `op` when an operand is no array or the element types have no common type.
fn common_element_types(a: &DataType, b: &DataType, op: &str) -> Result<Vec<DataType>> {
    let no_operator = || {
        ours(Error::plan(
            "42883",
            format!(
                "operator does not exist: {} {op} {}",
                crate::sql::functions::pg_type_name(a),
                crate::sql::functions::pg_type_name(b)
            ),
        ))
    };
    match (depth(a), depth(b)) {
        (0, 0) => return Err(no_operator()),
        (_, 0) if b.is_null() => return Ok(vec![a.clone(), a.clone()]),
        (0, _) if a.is_null() => return Ok(vec![b.clone(), b.clone()]),
        (0, _) | (_, 0) => return Err(no_operator()),
        _ => {}
    }
    let (ea, eb) = (leaf(a), leaf(b));
    let common = if ea.is_null() {
        eb.clone()
    } else if eb.is_null() {
        ea.clone()
    } else {
        datafusion::logical_expr::type_coercion::binary::comparison_coercion(ea, eb)
            .ok_or_else(no_operator)?
    };
    Ok(vec![with_leaf(a, &common), with_leaf(b, &common)])
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Int32Array, ListArray};
    use arrow::datatypes::Int32Type;
    use datafusion::logical_expr::ScalarUDF;

    fn int_lists(rows: Vec<Option<Vec<Option<i32>>>>) -> ArrayRef {
        Arc::new(ListArray::from_iter_primitive::<Int32Type, _, _>(rows))
    }

    fn call(udf: impl ScalarUDFImpl + 'static, a: ArrayRef, b: ArrayRef) -> Vec<Option<bool>> {
        let udf = ScalarUDF::new_from_impl(udf);
        let n = a.len();
        let args = ScalarFunctionArgs {
            args: vec![
                ColumnarValue::Array(a.clone()),
                ColumnarValue::Array(b.clone()),
            ],
            arg_fields: vec![
                Arc::new(Field::new("a", a.data_type().clone(), true)),
                Arc::new(Field::new("b", b.data_type().clone(), true)),
            ],
            number_rows: n,
            return_field: Arc::new(Field::new("r", DataType::Boolean, true)),
            config_options: Arc::default(),
        };
        let out = udf.invoke_with_args(args).expect("invoke");
        let out = out.into_array(n).expect("array");
        out.as_boolean().iter().collect()
    }

    /// Expected values worked out by PostgreSQL's rule: NULL elements sort last, a prefix is
    /// smaller.
    #[test]
    fn order_puts_null_elements_last() {
        let a = int_lists(vec![
            Some(vec![Some(1), None]),
            Some(vec![Some(1), None]),
            Some(vec![Some(1)]),
            Some(vec![None]),
            None,
            Some(vec![]),
        ]);
        let b = int_lists(vec![
            Some(vec![Some(1), Some(2)]),
            Some(vec![Some(1), None]),
            Some(vec![Some(1), Some(0)]),
            Some(vec![Some(5)]),
            Some(vec![Some(1)]),
            Some(vec![Some(1)]),
        ]);
        let lt = call(
            ArrayOrder::new(Operator::Lt).expect("lt"),
            a.clone(),
            b.clone(),
        );
        assert_eq!(
            lt,
            vec![
                Some(false),
                Some(false),
                Some(true),
                Some(false),
                None,
                Some(true)
            ]
        );
        let ge = call(ArrayOrder::new(Operator::GtEq).expect("ge"), a, b);
        assert_eq!(
            ge,
            vec![
                Some(true),
                Some(true),
                Some(false),
                Some(true),
                None,
                Some(false)
            ]
        );
    }

    #[test]
    fn float_elements_equal_as_numbers() {
        use arrow::array::Float64Array;
        let list = |v: Vec<Option<f64>>| -> ArrayRef {
            let field = Arc::new(Field::new_list_field(DataType::Float64, true));
            Arc::new(ListArray::new(
                field,
                arrow::buffer::OffsetBuffer::from_lengths([v.len()]),
                Arc::new(Float64Array::from(v)),
                None,
            ))
        };
        let eq = |op| {
            call(
                ArrayOrder::new(op).expect("op"),
                list(vec![Some(-0.0), Some(f64::NAN), None]),
                list(vec![Some(0.0), Some(f64::NAN), None]),
            )
        };
        assert_eq!(eq(Operator::Eq), vec![Some(true)]);
        assert_eq!(eq(Operator::NotEq), vec![Some(false)]);
        assert_eq!(eq(Operator::IsDistinctFrom), vec![Some(false)]);
    }

    #[test]
    fn containment_never_matches_null() {
        let a = int_lists(vec![
            Some(vec![Some(1), None]),
            Some(vec![Some(1), None]),
            Some(vec![Some(1), Some(2)]),
            Some(vec![Some(3)]),
            None,
        ]);
        let b = int_lists(vec![
            Some(vec![None]),
            Some(vec![Some(1), Some(1)]),
            Some(vec![]),
            Some(vec![Some(3), Some(4)]),
            Some(vec![]),
        ]);
        assert_eq!(
            call(ArrayContains::default(), a, b),
            vec![Some(false), Some(true), Some(true), Some(false), None]
        );
    }

    #[test]
    fn containment_flattens_dimensions() {
        // [[1,2],[3,4]] and [[5,6],[7,8]] against [4] and [4].
        let inner = int_lists(vec![
            Some(vec![Some(1), Some(2)]),
            Some(vec![Some(3), Some(4)]),
            Some(vec![Some(5), Some(6)]),
            Some(vec![Some(7), Some(8)]),
        ]);
        let field = Arc::new(Field::new_list_field(inner.data_type().clone(), true));
        let nested: ArrayRef = Arc::new(ListArray::new(
            field,
            arrow::buffer::OffsetBuffer::from_lengths([2, 2]),
            inner,
            None,
        ));
        let b = int_lists(vec![Some(vec![Some(4)]), Some(vec![Some(4)])]);
        let (leaves, offsets) = leaves(&nested).expect("leaves");
        assert_eq!(leaves.len(), 8);
        assert_eq!(offsets, vec![0, 4, 8]);
        let leaves_b = leaves_of(&b);
        assert_eq!(leaves_b, vec![4, 4]);
        assert_eq!(
            call(ArrayContains::default(), nested, b),
            vec![Some(true), Some(false)]
        );
    }

    fn leaves_of(a: &ArrayRef) -> Vec<i32> {
        let (l, _) = leaves(a).expect("leaves");
        l.as_any()
            .downcast_ref::<Int32Array>()
            .expect("int32")
            .values()
            .to_vec()
    }
}
