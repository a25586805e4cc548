//! `regexp_match(string, pattern [, flags])` as PostgreSQL returns it (docs, 9.7.3 "POSIX
//! Regular Expressions"): the captured substrings of the first match as a `text[]`, one
//! element per parenthesized subexpression, NULL for a subexpression that took no part in
//! the match (`regexp_match('ab', '(a)(x)?')` is `{a,NULL}`; DataFusion's drops it, `{a}`,
//! shifting later groups left); the whole match when the pattern has no subexpressions; NULL
//! when nothing matches.
//!
//! Patterns use the `regex` crate's syntax, as DataFusion's functions do (close to
//! PostgreSQL's advanced regular expressions for common patterns). Flags: `i`
//! (case-insensitive), `c` (case-sensitive, the default), `n`/`m` (newline-sensitive: `.`
//! does not match a newline, `^`/`$` match at lines), `s` (the default), `x` (expanded
//! syntax).

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, ListBuilder, StringBuilder};
use arrow::datatypes::{DataType, Field};
use datafusion::common::{DataFusionError, Result};
use datafusion::logical_expr::{
    ColumnarValue, ScalarFunctionArgs, ScalarUDFImpl, Signature, TypeSignature, Volatility,
};
use regex::Regex;

use crate::error::Error;
use crate::sql::semantics::ours;

/// `regexp_match(text, text [, text])` → `text[]`; see the module docs.
///
/// # Errors
/// `2201B` `invalid regular expression: ...` for a pattern that does not compile; `22023`
/// for the `g` flag (`regexp_match() does not support the "global" option`) and unknown
/// flags (`invalid regular expression option: "z"`), PostgreSQL's codes and messages.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct RegexpMatch {
    signature: Signature,
}

impl Default for RegexpMatch {
    fn default() -> Self {
        RegexpMatch {
            signature: Signature::one_of(
                vec![
                    TypeSignature::Exact(vec![DataType::Utf8, DataType::Utf8]),
                    TypeSignature::Exact(vec![DataType::Utf8, DataType::Utf8, DataType::Utf8]),
                ],
                Volatility::Immutable,
            ),
        }
    }
}

/// `pattern` compiled with PostgreSQL's `flags` (of `i`/`c` and of `n`/`s` the last wins, as
/// in PostgreSQL; `q` reads it as a literal string) for `function` (named in the error for
/// `g`).
///
/// # Errors
/// `22023` for `g` and unknown flags, `2201B` for a pattern that does not compile.
pub(crate) fn compile(pattern: &str, flags: &str, function: &str) -> Result<Regex> {
    let (mut insensitive, mut newline, mut expanded, mut literal) = (false, false, false, false);
    for f in flags.chars() {
        match f {
            'q' => literal = true,
            'i' => insensitive = true,
            'c' => insensitive = false,
            'n' | 'm' => newline = true,
            's' => newline = false,
            'x' => expanded = true,
            'g' => {
                return Err(ours(Error::data(
                    "22023",
                    format!("{function}() does not support the \"global\" option"),
                )));
            }
            other => {
                return Err(ours(Error::data(
                    "22023",
                    format!("invalid regular expression option: \"{other}\""),
                )));
            }
        }
    }
    // Without `n`, `.` matches a newline too (PostgreSQL's default).
    let mut prefix = String::from(if newline { "(?m" } else { "(?s" });
    if insensitive {
        prefix.push('i');
    }
    if expanded {
        prefix.push('x');
    }
    prefix.push(')');
    // `q`: the pattern is a literal string.
    let pattern = if literal {
        regex::escape(pattern)
    } else {
        pattern.to_string()
    };
    Regex::new(&format!("{prefix}{pattern}")).map_err(|e| {
        let detail = e
            .to_string()
            .lines()
            .rev()
            .find_map(|l| l.trim().strip_prefix("error: ").map(str::to_string))
            .unwrap_or_else(|| "it does not compile".to_string());
        ours(Error::data(
            "2201B",
            format!("invalid regular expression: {detail}"),
        ))
    })
}

impl ScalarUDFImpl for RegexpMatch {
    fn name(&self) -> &str {
        "regexp_match"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[DataType]) -> Result<DataType> {
        Ok(DataType::List(Arc::new(Field::new_list_field(
            DataType::Utf8,
            true,
        ))))
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let (rows, arrays) = text_arrays(&args)?;
        let text = arrays[0].as_string::<i32>();
        let patterns = arrays[1].as_string::<i32>();
        let flags = arrays.get(2).map(|f| f.as_string::<i32>());
        let mut out = ListBuilder::new(StringBuilder::new());
        // Patterns repeat: compile each distinct pattern and flags once.
        let mut last: Option<(String, String, Regex)> = None;
        for i in 0..rows {
            let flag = match flags {
                Some(f) if f.is_null(i) => None,
                Some(f) => Some(f.value(i)),
                None => Some(""),
            };
            let (Some(flag), false, false) = (flag, text.is_null(i), patterns.is_null(i)) else {
                out.append_null();
                continue;
            };
            let pattern = patterns.value(i);
            let cached = matches!(&last, Some((p, f, _)) if p == pattern && f == flag);
            if !cached {
                last = Some((
                    pattern.to_string(),
                    flag.to_string(),
                    compile(pattern, flag, "regexp_match")?,
                ));
            }
            let Some((_, _, re)) = &last else {
                return Err(DataFusionError::Internal("regex not compiled".into()));
            };
            match re.captures(text.value(i)) {
                None => out.append_null(),
                Some(caps) if caps.len() == 1 => {
                    out.values().append_option(caps.get(0).map(|m| m.as_str()));
                    out.append(true);
                }
                Some(caps) => {
                    for group in caps.iter().skip(1) {
                        out.values().append_option(group.map(|m| m.as_str()));
                    }
                    out.append(true);
                }
            }
        }
        let out: ArrayRef = Arc::new(out.finish());
        crate::sql::semantics::shape_result(&args.args, out)
    }
}

/// The rows to compute (1 when every argument is a constant) and the arguments as `text`
/// arrays of that length.
fn text_arrays(args: &ScalarFunctionArgs) -> Result<(usize, Vec<ArrayRef>)> {
    let scalar = args
        .args
        .iter()
        .all(|a| matches!(a, ColumnarValue::Scalar(_)));
    let rows = if scalar { 1 } else { args.number_rows };
    let arrays = args
        .args
        .iter()
        .map(|a| Ok(arrow::compute::cast(&a.to_array(rows)?, &DataType::Utf8)?))
        .collect::<Result<Vec<ArrayRef>>>()?;
    Ok((rows, arrays))
}

/// `substring(string FROM pattern)` / `substring(string, pattern)` of two texts as PostgreSQL
/// computes it (docs, 9.7.3 "POSIX Regular Expressions"): the part of `string` matched by the
/// first parenthesized subexpression of `pattern` when it has one (NULL when that
/// subexpression took no part in the match), else the whole match; NULL when nothing
/// matches. Other calls (`substring(s FROM 2 FOR 3)`) are DataFusion's `substr`, which this
/// wraps under its names (`substr`, `substring`).
///
/// # Errors
/// `2201B` for a pattern that does not compile.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct PgSubstring {
    inner: datafusion::logical_expr::ScalarUDF,
    signature: Signature,
}

impl PgSubstring {
    /// Wraps DataFusion's `substr`.
    pub fn new(inner: datafusion::logical_expr::ScalarUDF) -> Self {
        PgSubstring {
            signature: Signature::user_defined(inner.signature().volatility),
            inner,
        }
    }
}

/// True for the `(text, text)` form (a pattern, not a start position).
fn pattern_form(types: &[DataType]) -> bool {
    matches!(
        types,
        [
            DataType::Utf8 | DataType::Utf8View | DataType::LargeUtf8,
            DataType::Utf8 | DataType::Utf8View | DataType::LargeUtf8
        ]
    )
}

impl ScalarUDFImpl for PgSubstring {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn aliases(&self) -> &[String] {
        self.inner.aliases()
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        if pattern_form(arg_types) {
            return Ok(vec![DataType::Utf8, DataType::Utf8]);
        }
        // Any other call is coerced as DataFusion's signature of `substr` says.
        super::coerce_as_signature(arg_types, &self.inner)
    }

    fn return_type(&self, arg_types: &[DataType]) -> Result<DataType> {
        if pattern_form(arg_types) {
            return Ok(DataType::Utf8);
        }
        self.inner.return_type(arg_types)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let types: Vec<DataType> = args.args.iter().map(ColumnarValue::data_type).collect();
        if !pattern_form(&types) {
            return self.inner.invoke_with_args(args);
        }
        let (rows, arrays) = text_arrays(&args)?;
        let text = arrays[0].as_string::<i32>();
        let patterns = arrays[1].as_string::<i32>();
        let mut out = StringBuilder::new();
        let mut last: Option<(String, Regex)> = None;
        for i in 0..rows {
            if text.is_null(i) || patterns.is_null(i) {
                out.append_null();
                continue;
            }
            let pattern = patterns.value(i);
            if !matches!(&last, Some((p, _)) if p == pattern) {
                last = Some((pattern.to_string(), compile(pattern, "", "substring")?));
            }
            let Some((_, re)) = &last else {
                return Err(DataFusionError::Internal("regex not compiled".into()));
            };
            let found = re.captures(text.value(i)).and_then(|caps| {
                let group = if caps.len() > 1 { 1 } else { 0 };
                caps.get(group).map(|m| m.as_str())
            });
            out.append_option(found);
        }
        let out: ArrayRef = Arc::new(out.finish());
        crate::sql::semantics::shape_result(&args.args, out)
    }
}

#[cfg(test)]
mod tests {
    use super::compile;

    fn groups(text: &str, pattern: &str, flags: &str) -> Option<Vec<Option<String>>> {
        let re = compile(pattern, flags, "regexp_match").unwrap();
        let caps = re.captures(text)?;
        Some(if caps.len() == 1 {
            vec![caps.get(0).map(|m| m.as_str().to_string())]
        } else {
            caps.iter()
                .skip(1)
                .map(|g| g.map(|m| m.as_str().to_string()))
                .collect()
        })
    }

    #[test]
    fn groups_that_take_no_part_are_null() {
        let s = |v: &str| Some(v.to_string());
        assert_eq!(groups("ab", "(a)(x)?", ""), Some(vec![s("a"), None]));
        assert_eq!(groups("ab", "(x)?(b)", ""), Some(vec![None, s("b")]));
        assert_eq!(groups("foobar", "o+", ""), Some(vec![s("oo")]));
        assert_eq!(groups("abc", "z", ""), None);
        assert_eq!(groups("ABC", "(b)", "i"), Some(vec![s("B")]));
        assert_eq!(groups("ABC", "(b)", "ic"), None);
        assert_eq!(groups("ABC", "(b)", "ci"), Some(vec![s("B")]));
        assert_eq!(groups("a\nb", "a.b", ""), Some(vec![s("a\nb")]));
        assert_eq!(groups("a\nb", "a.b", "n"), None);
    }

    #[test]
    fn bad_flags_and_patterns_are_postgresql_errors() {
        let code = |p: &str, f: &str| {
            crate::error::Error::from(compile(p, f, "regexp_match").unwrap_err()).sqlstate()
        };
        assert_eq!(code("a", "g"), "22023");
        assert_eq!(code("a", "z"), "22023");
        assert_eq!(code("(a", ""), "2201B");
    }
}
