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
        pg_pattern(pattern)
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

/// `pattern` with PostgreSQL's word-boundary and end-of-string escapes in the `regex`
/// crate's spelling (docs 9.7.3.3, tables 9.21 and 9.22): `[[:<:]]` and `\m` the start of a
/// word (`\b{start}`), `[[:>:]]` and `\M` its end (`\b{end}`), `\y` a word boundary
/// (`\b`), `\Y` none (`\B`), `\Z` the end of the string (`\z`). In the `regex` crate's
/// syntax `[[:<:]]` was a character class and the others were refused. Other text is kept
/// (an escaped backslash, `\\m`, stays two characters).
pub(crate) fn pg_pattern(pattern: &str) -> String {
    let mut out = String::with_capacity(pattern.len());
    let mut rest = pattern;
    while let Some(c) = rest.chars().next() {
        if let Some(after) = rest.strip_prefix("[[:<:]]") {
            out.push_str(r"\b{start}");
            rest = after;
            continue;
        }
        if let Some(after) = rest.strip_prefix("[[:>:]]") {
            out.push_str(r"\b{end}");
            rest = after;
            continue;
        }
        if c == '\\' {
            let next = rest[1..].chars().next();
            let replaced = match next {
                Some('m') => Some(r"\b{start}"),
                Some('M') => Some(r"\b{end}"),
                Some('y') => Some(r"\b"),
                Some('Y') => Some(r"\B"),
                Some('Z') => Some(r"\z"),
                _ => None,
            };
            match (replaced, next) {
                (Some(r), _) => out.push_str(r),
                (None, Some(n)) => {
                    out.push('\\');
                    out.push(n);
                }
                (None, None) => out.push('\\'),
            }
            rest = &rest[1 + next.map_or(0, char::len_utf8)..];
            continue;
        }
        out.push(c);
        rest = &rest[c.len_utf8()..];
    }
    out
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

/// `regexp_replace(string, pattern, replacement [, flags])` as PostgreSQL computes it (docs,
/// 9.7.3; `textregexreplace`): the first match (every match with the `g` flag) replaced,
/// `.` matching a newline unless the `n` flag is given, as [`compile`] reads the flags. In the
/// replacement `\1` to `\9` stand for the parenthesized subexpressions (empty when one took
/// no part), `\&` for the whole match and `\\` for one backslash; any other character,
/// `$` and other backslashes included, stands for itself. With `g`, an empty match right
/// after another match is replaced too (`regexp_replace('aaa', 'a*', 'X', 'g')` is `XX`),
/// as PostgreSQL's search resumes where the last match ended. DataFusion's function read the
/// replacement in the `regex` crate's syntax (`$1` a group, `\&` literal) and kept `.` from
/// newlines. NULL when any argument is NULL.
///
/// # Errors
/// `2201B` for a pattern that does not compile; `22023` for an unknown flag.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct RegexpReplace {
    signature: Signature,
}

impl Default for RegexpReplace {
    fn default() -> Self {
        let text = || DataType::Utf8;
        RegexpReplace {
            signature: Signature::one_of(
                vec![
                    TypeSignature::Exact(vec![text(), text(), text()]),
                    TypeSignature::Exact(vec![text(), text(), text(), text()]),
                ],
                Volatility::Immutable,
            ),
        }
    }
}

/// `text` with the matches of `re` replaced by `replacement` read in PostgreSQL's syntax
/// (see [`RegexpReplace`]); every match when `global`.
fn replace_matches(re: &Regex, text: &str, replacement: &str, global: bool) -> String {
    let mut out = String::with_capacity(text.len());
    let mut copied = 0;
    let mut search = 0;
    while search <= text.len() {
        let Some(caps) = re.captures_at(text, search) else {
            break;
        };
        let Some(whole) = caps.get(0) else {
            break;
        };
        out.push_str(&text[copied..whole.start()]);
        let mut chars = replacement.chars().peekable();
        while let Some(c) = chars.next() {
            if c != '\\' {
                out.push(c);
                continue;
            }
            match chars.peek().copied() {
                Some(d @ '1'..='9') => {
                    chars.next();
                    let group = d as usize - '0' as usize;
                    if let Some(m) = caps.get(group) {
                        out.push_str(m.as_str());
                    }
                }
                Some('&') => {
                    chars.next();
                    out.push_str(whole.as_str());
                }
                Some('\\') => {
                    chars.next();
                    out.push('\\');
                }
                _ => out.push('\\'),
            }
        }
        copied = whole.end();
        if !global {
            break;
        }
        search = whole.end();
        if whole.is_empty() {
            // Step over one character so the search moves on.
            match text[search..].chars().next() {
                Some(c) => search += c.len_utf8(),
                None => break,
            }
        }
    }
    out.push_str(&text[copied..]);
    out
}

impl ScalarUDFImpl for RegexpReplace {
    fn name(&self) -> &str {
        "regexp_replace"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[DataType]) -> Result<DataType> {
        Ok(DataType::Utf8)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let (rows, arrays) = text_arrays(&args)?;
        let text = arrays[0].as_string::<i32>();
        let patterns = arrays[1].as_string::<i32>();
        let replacements = arrays[2].as_string::<i32>();
        let flags = arrays.get(3).map(|f| f.as_string::<i32>());
        let mut out = StringBuilder::new();
        // Patterns repeat: compile each distinct pattern and flags once.
        let mut last: Option<(String, String, Regex, bool)> = None;
        for i in 0..rows {
            let flag = match flags {
                Some(f) if f.is_null(i) => None,
                Some(f) => Some(f.value(i)),
                None => Some(""),
            };
            let (Some(flag), false, false, false) = (
                flag,
                text.is_null(i),
                patterns.is_null(i),
                replacements.is_null(i),
            ) else {
                out.append_null();
                continue;
            };
            let pattern = patterns.value(i);
            if !matches!(&last, Some((p, f, ..)) if p == pattern && f == flag) {
                let global = flag.contains('g');
                let others: String = flag.chars().filter(|c| *c != 'g').collect();
                let re = compile(pattern, &others, "regexp_replace")?;
                last = Some((pattern.to_string(), flag.to_string(), re, global));
            }
            let Some((_, _, re, global)) = &last else {
                return Err(DataFusionError::Internal("regex not compiled".into()));
            };
            out.append_value(replace_matches(
                re,
                text.value(i),
                replacements.value(i),
                *global,
            ));
        }
        let out: ArrayRef = Arc::new(out.finish());
        crate::sql::semantics::shape_result(&args.args, out)
    }
}

#[cfg(test)]
mod tests {
    use super::compile;

    /// Expected values from PostgreSQL 15.
    #[test]
    fn replacements_read_as_postgresql_reads_them() {
        let r = |text: &str, pattern: &str, replacement: &str, flags: &str| {
            let global = flags.contains('g');
            let others: String = flags.chars().filter(|c| *c != 'g').collect();
            let re = compile(pattern, &others, "regexp_replace").unwrap();
            super::replace_matches(&re, text, replacement, global)
        };
        assert_eq!(r("abc", "b", r"\&\&", ""), "abbc");
        assert_eq!(r("abc", "b", r"\\", ""), r"a\c");
        assert_eq!(r("abc", "b", "$1", ""), "a$1c");
        assert_eq!(r("abc", "b", r"\0", ""), r"a\0c");
        assert_eq!(r("abc", "(b)(x)?", r"[\2\1]", ""), "a[b]c");
        assert_eq!(r("aaa", "a*", "X", "g"), "XX");
        assert_eq!(r("baaac", "a*", "X", "g"), "XbXXcX");
        assert_eq!(r("a\nb", "a.b", "X", ""), "X");
        assert_eq!(r("a\nb", ".", "X", "g"), "XXX");
        assert_eq!(r("a\nb", ".", "X", "gn"), "X\nX");
        assert_eq!(r("AbA", "a", "x", "gi"), "xbx");
        assert_eq!(r("héllo", "", "-", "g"), "-h-é-l-l-o-");
        // Word boundaries in PostgreSQL's spellings.
        assert_eq!(r("foo bar", "[[:<:]]b", "X", ""), "foo Xar");
        assert_eq!(r("foo bar", r"o\M", "X", "g"), "foX bar");
        assert_eq!(r("foo bar", r"\mb", "X", ""), "foo Xar");
        assert_eq!(r("a b", r"\y", "|", "g"), "|a| |b|");
        assert_eq!(r("ab", r"b\Z", "X", ""), "aX");
        assert_eq!(super::pg_pattern(r"\\m"), r"\\m");
    }

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
