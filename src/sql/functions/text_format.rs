//! PostgreSQL's string formatting and splitting functions DataFusion lacks (PostgreSQL docs,
//! 9.4 "String Functions and Operators", 9.4.1 "format", 9.7.3 "POSIX Regular Expressions"):
//!
//! ```text
//!  quote_literal('it''s')                   'it''s'      (a backslash doubled, E'...')
//!  quote_nullable(NULL)                     NULL         (the word; else quote_literal)
//!  format('%s, %I, %L', 1, 'a b', NULL)     1, "a b", NULL
//!  format('%2$s %1$s|%-4s|', 'a', 'b')      b a|b   |
//!  regexp_split_to_array('a1b22c', '\d+')   {a,b,c}
//! ```
//!
//! Arguments of other types are read as their text (the casts Weir gives PostgreSQL's output
//! forms: `t` for true, `1.50` for a numeric). The regular expressions are Rust's `regex`
//! syntax, as in DataFusion's other regexp functions.

use std::sync::Arc;

use arrow::array::{Array, AsArray, ListBuilder, StringArray, StringBuilder};
use arrow::datatypes::{DataType, Field};
use datafusion::common::{DataFusionError, Result};
use datafusion::logical_expr::{
    ColumnarValue, ScalarFunctionArgs, ScalarUDFImpl, Signature, Volatility,
};

use crate::error::Error;

fn ours(e: Error) -> DataFusionError {
    DataFusionError::External(Box::new(e))
}

/// `s` as a SQL string literal (PostgreSQL's `quote_literal`): quotes doubled, and when it
/// holds a backslash, backslashes doubled and an `E` before it.
pub fn quote_literal(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    if s.contains('\\') {
        out.push('E');
    }
    out.push('\'');
    for c in s.chars() {
        if c == '\'' || c == '\\' {
            out.push(c);
        }
        out.push(c);
    }
    out.push('\'');
    out
}

/// PostgreSQL 15's keywords that are not unreserved (reserved, `type_func_name` and
/// `col_name` keywords, from the keyword table in its docs, appendix C): an identifier
/// spelled as one of them must be quoted.
const QUOTED_KEYWORDS: &[&str] = &[
    "all",
    "analyse",
    "analyze",
    "and",
    "any",
    "array",
    "as",
    "asc",
    "asymmetric",
    "authorization",
    "between",
    "bigint",
    "binary",
    "bit",
    "boolean",
    "both",
    "case",
    "cast",
    "char",
    "character",
    "check",
    "coalesce",
    "collate",
    "collation",
    "column",
    "concurrently",
    "constraint",
    "create",
    "cross",
    "current_catalog",
    "current_date",
    "current_role",
    "current_schema",
    "current_time",
    "current_timestamp",
    "current_user",
    "dec",
    "decimal",
    "default",
    "deferrable",
    "desc",
    "distinct",
    "do",
    "else",
    "end",
    "except",
    "exists",
    "extract",
    "false",
    "fetch",
    "float",
    "for",
    "foreign",
    "freeze",
    "from",
    "full",
    "grant",
    "greatest",
    "group",
    "grouping",
    "having",
    "ilike",
    "in",
    "initially",
    "inner",
    "inout",
    "int",
    "integer",
    "intersect",
    "interval",
    "into",
    "is",
    "isnull",
    "join",
    "lateral",
    "leading",
    "least",
    "left",
    "like",
    "limit",
    "localtime",
    "localtimestamp",
    "national",
    "natural",
    "nchar",
    "none",
    "normalize",
    "not",
    "notnull",
    "null",
    "nullif",
    "numeric",
    "offset",
    "on",
    "only",
    "or",
    "order",
    "out",
    "outer",
    "overlaps",
    "overlay",
    "placing",
    "position",
    "precision",
    "primary",
    "real",
    "references",
    "returning",
    "right",
    "row",
    "select",
    "session_user",
    "setof",
    "similar",
    "smallint",
    "some",
    "substring",
    "symmetric",
    "table",
    "tablesample",
    "then",
    "time",
    "timestamp",
    "to",
    "trailing",
    "treat",
    "trim",
    "true",
    "union",
    "unique",
    "user",
    "using",
    "values",
    "varchar",
    "variadic",
    "verbose",
    "when",
    "where",
    "window",
    "with",
    "xmlattributes",
    "xmlconcat",
    "xmlelement",
    "xmlexists",
    "xmlforest",
    "xmlnamespaces",
    "xmlparse",
    "xmlpi",
    "xmlroot",
    "xmlserialize",
    "xmltable",
];

/// `s` as an SQL identifier (PostgreSQL's `quote_ident`, `quote_identifier` in its
/// `ruleutils.c`): as it is when it is lowercase ASCII letters, digits and `_`, not starting
/// with a digit, and no keyword that must be quoted ([`QUOTED_KEYWORDS`]); else in double
/// quotes, quotes doubled (`Abc`, `a$`, `é`, `select` and the empty name are quoted).
pub fn quote_ident(s: &str) -> String {
    let plain = s
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_lowercase() || c == '_')
        && s.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        && !QUOTED_KEYWORDS.contains(&s);
    if plain {
        return s.to_string();
    }
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        if c == '"' {
            out.push('"');
        }
        out.push(c);
    }
    out.push('"');
    out
}

/// Which function a [`TextFormat`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    /// `quote_literal(x)`: NULL for NULL.
    QuoteLiteral,
    /// `quote_nullable(x)`: `NULL` (the word) for NULL.
    QuoteNullable,
    /// `format(formatstr, args...)`.
    Format,
    /// `quote_ident(x)`: NULL for NULL.
    QuoteIdent,
}

/// `quote_literal`, `quote_nullable` or `format` (see the module docs), of text (`Utf8`)
/// arguments, returning `text`.
///
/// Errors of `format`: `22023` for an unknown conversion (`%d`), an unterminated one, or a
/// width or position out of range; `22023` `too few arguments for format()`; `22004` for a
/// NULL formatted with `%I`.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct TextFormat {
    kind: Kind,
    signature: Signature,
}

impl TextFormat {
    /// The function `kind`.
    pub fn new(kind: Kind) -> Self {
        TextFormat {
            kind,
            signature: Signature::user_defined(Volatility::Immutable),
        }
    }
}

/// One conversion of a format string: `%[position$][-][width]type`.
fn format_one(format: &str, args: &[Option<&str>]) -> Result<String> {
    let bad = |what: &str| ours(Error::data("22023", what.to_string()));
    let mut out = String::with_capacity(format.len());
    let mut chars = format.chars().peekable();
    let mut next_arg = 0usize;
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        if chars.peek() == Some(&'%') {
            chars.next();
            out.push('%');
            continue;
        }
        // Digits are a position when a `$` follows them, else the width.
        let mut digits = String::new();
        while let Some(d) = chars.peek().filter(|d| d.is_ascii_digit()) {
            digits.push(*d);
            chars.next();
        }
        let mut position = None;
        if !digits.is_empty() && chars.peek() == Some(&'$') {
            chars.next();
            let p: usize = digits.parse().ok().filter(|p| *p >= 1).ok_or_else(|| {
                bad("format specifies argument 0, but arguments are numbered from 1")
            })?;
            position = Some(p - 1);
            digits.clear();
        }
        let mut left = false;
        if digits.is_empty() {
            if chars.peek() == Some(&'-') {
                left = true;
                chars.next();
            }
            while let Some(d) = chars.peek().filter(|d| d.is_ascii_digit()) {
                digits.push(*d);
                chars.next();
            }
        }
        let width: usize = if digits.is_empty() {
            0
        } else {
            digits
                .parse()
                .ok()
                .filter(|w| *w <= 10_485_760)
                .ok_or_else(|| bad("number is out of range"))?
        };
        let Some(kind) = chars.next() else {
            return Err(bad("unterminated format() type specifier"));
        };
        if !matches!(kind, 's' | 'I' | 'L') {
            return Err(bad(&format!(
                "unrecognized format() type specifier \"{kind}\" (use %s, %I, %L or %%)"
            )));
        }
        let i = position.unwrap_or(next_arg);
        next_arg = i + 1;
        let Some(arg) = args.get(i) else {
            return Err(bad("too few arguments for format()"));
        };
        let text = match (kind, arg) {
            ('s', Some(v)) => (*v).to_string(),
            ('s', None) => String::new(),
            ('I', Some(v)) => quote_ident(v),
            ('I', None) => {
                return Err(ours(Error::data(
                    "22004",
                    "null values cannot be formatted as an SQL identifier",
                )));
            }
            (_, Some(v)) => quote_literal(v),
            (_, None) => "NULL".to_string(),
        };
        let pad = width.saturating_sub(text.chars().count());
        if left {
            out.push_str(&text);
            out.extend(std::iter::repeat_n(' ', pad));
        } else {
            out.extend(std::iter::repeat_n(' ', pad));
            out.push_str(&text);
        }
    }
    Ok(out)
}

impl ScalarUDFImpl for TextFormat {
    fn name(&self) -> &str {
        match self.kind {
            Kind::QuoteLiteral => "quote_literal",
            Kind::QuoteNullable => "quote_nullable",
            Kind::Format => "format",
            Kind::QuoteIdent => "quote_ident",
        }
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        let arity_ok = match self.kind {
            Kind::Format => !arg_types.is_empty(),
            _ => arg_types.len() == 1,
        };
        if !arity_ok {
            return Err(super::math::no_function(self.name(), arg_types));
        }
        Ok(vec![DataType::Utf8; arg_types.len()])
    }

    fn return_type(&self, _arg_types: &[DataType]) -> Result<DataType> {
        Ok(DataType::Utf8)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let arrays = ColumnarValue::values_to_arrays(&args.args)?;
        let texts: Vec<&StringArray> = arrays.iter().map(|a| a.as_string::<i32>()).collect();
        let n = args.number_rows;
        let mut out = StringBuilder::with_capacity(n, n * 8);
        for row in 0..n {
            let value = |i: usize| -> Option<&str> {
                let a = texts[i];
                let r = if a.len() == 1 { 0 } else { row };
                a.is_valid(r).then(|| a.value(r))
            };
            match self.kind {
                Kind::QuoteLiteral => out.append_option(value(0).map(quote_literal)),
                Kind::QuoteIdent => out.append_option(value(0).map(quote_ident)),
                Kind::QuoteNullable => {
                    out.append_value(value(0).map_or_else(|| "NULL".to_string(), quote_literal))
                }
                Kind::Format => match value(0) {
                    None => out.append_null(),
                    Some(f) => {
                        let rest: Vec<Option<&str>> = (1..texts.len()).map(value).collect();
                        out.append_value(format_one(f, &rest)?);
                    }
                },
            }
        }
        crate::sql::semantics::shape_result(&args.args, Arc::new(out.finish()))
    }
}

/// `regexp_split_to_array(string, pattern [, flags])`: `string` split at each match of
/// `pattern`, a `text[]`; NULL when an argument is NULL. A match of no characters at the
/// start or end of the string or right after the previous match does not split (PostgreSQL's
/// rule: `regexp_split_to_array('abc', '')` is `{a,b,c}`). Flags as `regexp_match` takes
/// them (`i`, `c`, `n`, `s`, `x`; `.` matches a newline unless `n`); `g` and others are
/// `22023`.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct RegexpSplit {
    signature: Signature,
}

impl RegexpSplit {
    /// The function.
    pub fn new() -> Self {
        RegexpSplit {
            signature: Signature::user_defined(Volatility::Immutable),
        }
    }
}

impl Default for RegexpSplit {
    fn default() -> Self {
        Self::new()
    }
}

/// The pieces of `s` between the matches of `re`, PostgreSQL's way (see [`RegexpSplit`]).
pub fn regexp_split(s: &str, re: &regex::Regex) -> Vec<String> {
    let mut pieces = Vec::new();
    let mut start = 0;
    let mut last_end = None;
    for m in re.find_iter(s) {
        if m.start() == m.end()
            && (m.start() == 0 || m.start() == s.len() || Some(m.start()) == last_end)
        {
            continue;
        }
        pieces.push(s[start..m.start()].to_string());
        start = m.end();
        last_end = Some(m.end());
    }
    pieces.push(s[start..].to_string());
    pieces
}

impl ScalarUDFImpl for RegexpSplit {
    fn name(&self) -> &str {
        "regexp_split_to_array"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        if !matches!(arg_types.len(), 2 | 3) {
            return Err(super::math::no_function(self.name(), arg_types));
        }
        Ok(vec![DataType::Utf8; arg_types.len()])
    }

    fn return_type(&self, _arg_types: &[DataType]) -> Result<DataType> {
        Ok(DataType::List(Arc::new(Field::new_list_field(
            DataType::Utf8,
            true,
        ))))
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let arrays = ColumnarValue::values_to_arrays(&args.args)?;
        let texts: Vec<&StringArray> = arrays.iter().map(|a| a.as_string::<i32>()).collect();
        let n = args.number_rows;
        let mut out = ListBuilder::new(StringBuilder::new());
        // The last pattern compiled, reused while rows repeat it (the usual constant).
        let mut cached: Option<(String, String, regex::Regex)> = None;
        for row in 0..n {
            let value = |i: usize| -> Option<&str> {
                let a = texts[i];
                let r = if a.len() == 1 { 0 } else { row };
                a.is_valid(r).then(|| a.value(r))
            };
            let flags = if texts.len() == 3 { value(2) } else { Some("") };
            let (Some(s), Some(p), Some(flags)) = (value(0), value(1), flags) else {
                out.append_null();
                continue;
            };
            if !cached
                .as_ref()
                .is_some_and(|(cp, cf, _)| cp == p && cf == flags)
            {
                cached = Some((
                    p.to_string(),
                    flags.to_string(),
                    super::regex::compile(p, flags, "regexp_split_to_array")?,
                ));
            }
            let Some((_, _, re)) = &cached else {
                continue;
            };
            for piece in regexp_split(s, re) {
                out.values().append_value(piece);
            }
            out.append(true);
        }
        crate::sql::semantics::shape_result(&args.args, Arc::new(out.finish()))
    }
}

/// `upper(text)` / `lower(text)` as PostgreSQL computes them: character by character, each
/// character mapped to its one-character upper or lower case (the C library's `towupper` /
/// `towlower` that PostgreSQL's `str_toupper` uses under a libc locale), so the text keeps its
/// length. Where Unicode's full case mapping gives several characters, the character is kept
/// (`upper('straße')` is `STRAßE`, not `STRASSE`), except that `İ` lowers to `i`; a capital
/// sigma is `σ` wherever it stands (no final-sigma rule). NULL stays NULL.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct CaseMap {
    upper: bool,
    signature: Signature,
}

impl CaseMap {
    /// `upper` (`true`) or `lower`.
    pub fn new(upper: bool) -> Self {
        CaseMap {
            upper,
            signature: Signature::user_defined(Volatility::Immutable),
        }
    }
}

/// `s` mapped character by character (see [`CaseMap`]).
pub fn case_map(s: &str, upper: bool) -> String {
    s.chars()
        .map(|c| {
            let mut mapped: Vec<char> = if upper {
                c.to_uppercase().collect()
            } else {
                c.to_lowercase().collect()
            };
            match mapped.len() {
                1 => mapped.remove(0),
                _ if !upper && c == '\u{130}' => 'i',
                _ => c,
            }
        })
        .collect()
}

impl ScalarUDFImpl for CaseMap {
    fn name(&self) -> &str {
        if self.upper { "upper" } else { "lower" }
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        match arg_types {
            [DataType::Utf8 | DataType::Utf8View | DataType::LargeUtf8 | DataType::Null] => {
                Ok(vec![DataType::Utf8])
            }
            _ => Err(super::math::no_function(self.name(), arg_types)),
        }
    }

    fn return_type(&self, _arg_types: &[DataType]) -> Result<DataType> {
        Ok(DataType::Utf8)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        super::map_text(&args, |s| Ok(case_map(s, self.upper)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoting_and_format_follow_postgresql() {
        // PostgreSQL 15: quote_literal('it''s') 'it''s'; quote_literal(E'a\\b') E'a\\b';
        // format('%s|%I|%L|%L|%%', 1, 'A', NULL, 'x') 1|"A"|NULL|'x'|%;
        // format('%2$s %1$s|%-4s|%3s|', 'a', 'b', 'c') b a|b   |  c| (after a position the
        // next conversion takes the argument after it).
        assert_eq!(quote_literal("it's"), "'it''s'");
        assert_eq!(quote_literal("a\\b"), "E'a\\\\b'");
        assert_eq!(quote_ident("a b"), "\"a b\"");
        assert_eq!(quote_ident("ab_1"), "ab_1");
        assert_eq!(quote_ident("Ab"), "\"Ab\"");
        assert_eq!(
            format_one("%s|%I|%L|%L|%%", &[Some("1"), Some("A"), None, Some("x")]).unwrap(),
            "1|\"A\"|NULL|'x'|%"
        );
        assert_eq!(
            format_one("%2$s %1$s|%-4s|%3s|", &[Some("a"), Some("b"), Some("c")]).unwrap(),
            "b a|b   |  c|"
        );
        assert!(format_one("%s %s", &[Some("a")]).is_err());
        assert!(format_one("%d", &[Some("a")]).is_err());
        assert!(format_one("%I", &[None]).is_err());
        // PostgreSQL 15: quote_ident of these is "a$", "Abc", "int", "user", name, "", a_1.
        let q: Vec<String> = ["a$", "Abc", "int", "user", "name", "", "a_1"]
            .iter()
            .map(|s| quote_ident(s))
            .collect();
        let quoted = |s: &str| format!("\"{s}\"");
        assert_eq!(
            q,
            [
                quoted("a$"),
                quoted("Abc"),
                quoted("int"),
                quoted("user"),
                "name".into(),
                quoted(""),
                "a_1".into()
            ]
        );
    }

    #[test]
    fn splits_skip_empty_matches_at_the_edges() {
        // PostgreSQL 15: regexp_split_to_array('abc', '') {a,b,c};
        // regexp_split_to_array('a1b22c', '\d+') {a,b,c}; (',a,,b,', ',') {"",a,"",b,""}.
        let re = regex::Regex::new("").unwrap();
        assert_eq!(regexp_split("abc", &re), vec!["a", "b", "c"]);
        let re = regex::Regex::new(r"\d+").unwrap();
        assert_eq!(regexp_split("a1b22c", &re), vec!["a", "b", "c"]);
        let re = regex::Regex::new(",").unwrap();
        assert_eq!(regexp_split(",a,,b,", &re), vec!["", "a", "", "b", ""]);
    }

    #[test]
    fn case_maps_character_by_character() {
        assert_eq!(case_map("straße", true), "STRAßE");
        assert_eq!(case_map("ΑΣ", false), "ασ");
        assert_eq!(case_map("İx", false), "ix");
        assert_eq!(case_map("Ǆemal ǉ", true), "ǄEMAL Ǉ");
        assert_eq!(case_map("ÀÉÎ", false), "àéî");
    }
}
