//! Java's `Formatter` syntax, for `format(format, args…)` (conversion.rs): `%[index$][flags]
//! [width][.precision]conversion` with the conversions `b s c d o x e f g t % n` (and their upper
//! case forms), the flags `- # + space 0 , (` and `<` (the previous argument again).
//!
//! Arguments are read as Trino hands them to Java: integers as `Long`, decimals as `BigDecimal`,
//! floating point as `Double`, text as `String`, dates and timestamps as `LocalDate` and
//! `LocalDateTime` (with a zone, `ZonedDateTime`), NULL as `null`. Floating-point numbers round
//! half up from their shortest decimal form, as Java's do (`%.1f` of 0.15 is 0.2).

use chrono::{Datelike, NaiveDate, NaiveDateTime, Timelike};

/// One argument, as Java would see it.
#[derive(Debug, Clone)]
pub(crate) enum Arg {
    Null,
    Bool(bool),
    Long(i128),
    /// A decimal's plain text (`-12.50`).
    Decimal(String),
    Double(f64),
    Text(String),
    Date(NaiveDate),
    /// A local date-time, and the zone of a timestamp with one.
    DateTime(NaiveDateTime, Option<String>),
}

impl Arg {
    fn java_name(&self) -> &'static str {
        match self {
            Arg::Null => "null",
            Arg::Bool(_) => "java.lang.Boolean",
            Arg::Long(_) => "java.lang.Long",
            Arg::Decimal(_) => "java.math.BigDecimal",
            Arg::Double(_) => "java.lang.Double",
            Arg::Text(_) => "java.lang.String",
            Arg::Date(_) => "java.time.LocalDate",
            Arg::DateTime(_, None) => "java.time.LocalDateTime",
            Arg::DateTime(_, Some(_)) => "java.time.ZonedDateTime",
        }
    }

    /// `toString()`.
    fn text(&self) -> String {
        match self {
            Arg::Null => "null".into(),
            Arg::Bool(b) => b.to_string(),
            Arg::Long(v) => v.to_string(),
            Arg::Decimal(d) => d.clone(),
            Arg::Double(v) => java_double(*v),
            Arg::Text(s) => s.clone(),
            Arg::Date(d) => d.format("%Y-%m-%d").to_string(),
            Arg::DateTime(t, zone) => {
                let mut s = t.format("%Y-%m-%dT%H:%M").to_string();
                let nanos = t.nanosecond();
                if t.second() != 0 || nanos != 0 {
                    s.push_str(&format!(":{:02}", t.second()));
                }
                if nanos != 0 {
                    let digits = format!("{nanos:09}");
                    let shown = if nanos % 1_000_000 == 0 {
                        3
                    } else if nanos % 1_000 == 0 {
                        6
                    } else {
                        9
                    };
                    s.push('.');
                    s.push_str(&digits[..shown]);
                }
                if let Some(zone) = zone {
                    s.push_str(&format!("[{zone}]"));
                }
                s
            }
        }
    }
}

/// Java's `Double.toString`: plain from 10^-3 to 10^7, otherwise `d.dddE±n`; always a fraction.
fn java_double(v: f64) -> String {
    if v.is_nan() {
        return "NaN".into();
    }
    if v.is_infinite() {
        return if v > 0.0 { "Infinity" } else { "-Infinity" }.into();
    }
    if v == 0.0 {
        return if v.is_sign_negative() { "-0.0" } else { "0.0" }.into();
    }
    let a = v.abs();
    if (1e-3..1e7).contains(&a) {
        let s = format!("{v}");
        return if s.contains('.') { s } else { format!("{s}.0") };
    }
    let s = format!("{v:e}");
    let (mantissa, exp) = s.split_once('e').unwrap_or((&s, "0"));
    let mantissa = if mantissa.contains('.') {
        mantissa.to_string()
    } else {
        format!("{mantissa}.0")
    };
    format!("{mantissa}E{exp}")
}

/// A non-negative number's decimal digits: the value is `0.d1d2… × 10^exp`.
struct Digits {
    digits: Vec<u8>,
    exp: i32,
}

impl Digits {
    /// From plain text (`123.45`) or scientific (`1.2345e2`), without a sign.
    fn parse(text: &str) -> Self {
        let (mantissa, e) = match text.split_once(['e', 'E']) {
            Some((m, e)) => (m, e.parse::<i32>().unwrap_or(0)),
            None => (text, 0),
        };
        let (int, frac) = mantissa.split_once('.').unwrap_or((mantissa, ""));
        let mut digits: Vec<u8> = int.bytes().chain(frac.bytes()).map(|b| b - b'0').collect();
        let mut exp = int.len() as i32 + e;
        while digits.first() == Some(&0) {
            digits.remove(0);
            exp -= 1;
        }
        while digits.last() == Some(&0) {
            digits.pop();
        }
        if digits.is_empty() {
            exp = 1;
        }
        Self { digits, exp }
    }

    /// Rounded half up to keep `keep` digits (from the first); may carry into a new digit.
    fn round(&mut self, keep: i32) {
        if keep < 0 {
            self.digits.clear();
            return;
        }
        let keep = keep as usize;
        if keep >= self.digits.len() {
            return;
        }
        let up = self.digits[keep] >= 5;
        self.digits.truncate(keep);
        if up {
            let mut i = keep;
            loop {
                if i == 0 {
                    self.digits.insert(0, 1);
                    self.exp += 1;
                    break;
                }
                i -= 1;
                if self.digits[i] == 9 {
                    self.digits[i] = 0;
                } else {
                    self.digits[i] += 1;
                    break;
                }
            }
        }
        if self.digits.iter().all(|d| *d == 0) {
            self.digits.clear();
        }
    }

    fn digit(&self, i: i32) -> char {
        match usize::try_from(i).ok().and_then(|i| self.digits.get(i)) {
            Some(d) => (b'0' + d) as char,
            None => '0',
        }
    }

    /// Fixed notation with `precision` fraction digits: (integer part, fraction).
    fn fixed(mut self, precision: usize) -> (String, String) {
        if self.digits.is_empty() {
            return ("0".into(), "0".repeat(precision));
        }
        self.round(self.exp + precision as i32);
        if self.digits.is_empty() {
            return ("0".into(), "0".repeat(precision));
        }
        let int: String = if self.exp <= 0 {
            "0".into()
        } else {
            (0..self.exp).map(|i| self.digit(i)).collect()
        };
        let frac: String = (0..precision as i32)
            .map(|i| self.digit(self.exp + i))
            .collect();
        (int, frac)
    }

    /// Scientific notation with `precision` fraction digits: (mantissa, exponent).
    fn scientific(mut self, precision: usize) -> (String, i32) {
        if self.digits.is_empty() {
            let frac = "0".repeat(precision);
            return (
                if precision > 0 {
                    format!("0.{frac}")
                } else {
                    "0".into()
                },
                0,
            );
        }
        self.round(precision as i32 + 1);
        let mut m = String::from(self.digit(0));
        if precision > 0 {
            m.push('.');
            m.extend((1..=precision as i32).map(|i| self.digit(i)));
        }
        (m, self.exp - 1)
    }
}

fn grouped(int: &str) -> String {
    let mut out = String::new();
    for (i, c) in int.chars().enumerate() {
        if i > 0 && (int.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[derive(Default, Clone)]
struct Spec {
    index: Option<usize>,
    previous: bool,
    left: bool,
    alternate: bool,
    plus: bool,
    space: bool,
    zero: bool,
    group: bool,
    parens: bool,
    width: Option<usize>,
    precision: Option<usize>,
    time: Option<bool>,
    conversion: char,
}

/// Pads `body` (already signed) to the width: spaces on the left, or the right with `-`.
fn pad(spec: &Spec, body: String) -> String {
    let width = spec.width.unwrap_or(0);
    let len = body.chars().count();
    if len >= width {
        return body;
    }
    let fill = " ".repeat(width - len);
    if spec.left {
        body + &fill
    } else {
        fill + &body
    }
}

/// A number's digits with its sign and the flags `+ space ( 0 ,` applied, padded to the width.
fn signed(spec: &Spec, negative: bool, digits: String) -> String {
    let (prefix, suffix) = match (negative, spec.parens) {
        (true, true) => ("(", ")"),
        (true, false) => ("-", ""),
        (false, _) if spec.plus => ("+", ""),
        (false, _) if spec.space => (" ", ""),
        _ => ("", ""),
    };
    let mut body = digits;
    if spec.zero
        && let Some(width) = spec.width
    {
        let used = prefix.len() + suffix.len() + body.chars().count();
        if used < width {
            body = "0".repeat(width - used) + &body;
        }
    }
    pad(spec, format!("{prefix}{body}{suffix}"))
}

fn mismatch(spec: &Spec, arg: &Arg) -> String {
    format!(
        "IllegalFormatConversionException: {} != {}",
        spec.conversion,
        arg.java_name()
    )
}

/// Formats `args` by `format`, or says why the format does not fit them.
pub(crate) fn format(format: &str, args: &[Arg]) -> Result<String, String> {
    let chars: Vec<char> = format.chars().collect();
    let mut out = String::new();
    let mut i = 0;
    let mut ordinary = 0;
    let mut last: Option<usize> = None;
    while i < chars.len() {
        if chars[i] != '%' {
            out.push(chars[i]);
            i += 1;
            continue;
        }
        let start = i;
        i += 1;
        let mut spec = Spec::default();
        // An argument index: digits then `$`.
        let mut j = i;
        while j < chars.len() && chars[j].is_ascii_digit() {
            j += 1;
        }
        if j > i && j < chars.len() && chars[j] == '$' {
            let n: usize = chars[i..j].iter().collect::<String>().parse().unwrap_or(0);
            if n == 0 {
                return Err(format!(
                    "IllegalFormatArgumentIndexException: Illegal format argument index = {n}"
                ));
            }
            spec.index = Some(n - 1);
            i = j + 1;
        }
        while i < chars.len() {
            match chars[i] {
                '-' => spec.left = true,
                '#' => spec.alternate = true,
                '+' => spec.plus = true,
                ' ' => spec.space = true,
                '0' => spec.zero = true,
                ',' => spec.group = true,
                '(' => spec.parens = true,
                '<' => spec.previous = true,
                _ => break,
            }
            i += 1;
        }
        let number = |i: &mut usize| {
            let from = *i;
            while *i < chars.len() && chars[*i].is_ascii_digit() {
                *i += 1;
            }
            (from < *i).then(|| {
                chars[from..*i]
                    .iter()
                    .collect::<String>()
                    .parse::<usize>()
                    .unwrap_or(usize::MAX)
            })
        };
        spec.width = number(&mut i);
        if i < chars.len() && chars[i] == '.' {
            i += 1;
            spec.precision = number(&mut i);
            if spec.precision.is_none() {
                return Err(format!(
                    "IllegalFormatPrecisionException: {}",
                    chars[start..i].iter().collect::<String>()
                ));
            }
        }
        if spec.width.is_some_and(|w| w > 10_000) || spec.precision.is_some_and(|p| p > 10_000) {
            return Err("width or precision over 10000".into());
        }
        if i < chars.len() && matches!(chars[i], 't' | 'T') {
            spec.time = Some(chars[i] == 'T');
            i += 1;
        }
        let Some(&conversion) = chars.get(i) else {
            return Err(format!(
                "UnknownFormatConversionException: Conversion = '{}'",
                chars[start..].iter().collect::<String>()
            ));
        };
        spec.conversion = conversion;
        i += 1;
        if spec.time.is_none() {
            match conversion {
                '%' => {
                    out.push_str(&pad(&spec, "%".into()));
                    continue;
                }
                'n' => {
                    out.push('\n');
                    continue;
                }
                _ => {}
            }
        }
        if spec.left && spec.width.is_none() {
            return Err(format!("MissingFormatWidthException: %-{conversion}"));
        }
        let index = if spec.previous {
            last.ok_or_else(|| {
                format!("MissingFormatArgumentException: Format specifier '%<{conversion}'")
            })?
        } else if let Some(n) = spec.index {
            n
        } else {
            ordinary += 1;
            ordinary - 1
        };
        let Some(arg) = args.get(index) else {
            return Err(format!(
                "MissingFormatArgumentException: Format specifier '{}'",
                chars[start..i].iter().collect::<String>()
            ));
        };
        last = Some(index);
        out.push_str(&one(&spec, arg)?);
    }
    Ok(out)
}

fn one(spec: &Spec, arg: &Arg) -> Result<String, String> {
    if let Some(upper) = spec.time {
        let text = time(spec, arg)?;
        let text = if upper { text.to_uppercase() } else { text };
        return Ok(pad(spec, text));
    }
    let upper = spec.conversion.is_ascii_uppercase();
    let cased = |s: String| if upper { s.to_uppercase() } else { s };
    let truncated = |s: String| match spec.precision {
        Some(p) => s.chars().take(p).collect(),
        None => s,
    };
    match spec.conversion.to_ascii_lowercase() {
        'b' => {
            let b = match arg {
                Arg::Null => false,
                Arg::Bool(b) => *b,
                _ => true,
            };
            Ok(pad(spec, cased(truncated(b.to_string()))))
        }
        's' => Ok(pad(spec, cased(truncated(arg.text())))),
        'c' => match arg {
            Arg::Null => Ok(pad(spec, "null".into())),
            Arg::Long(v) => match u32::try_from(*v).ok().and_then(char::from_u32) {
                Some(c) => Ok(pad(spec, cased(c.to_string()))),
                None => Err(format!(
                    "IllegalFormatCodePointException: Code point = {v:#x}"
                )),
            },
            _ => Err(mismatch(spec, arg)),
        },
        'd' => match arg {
            Arg::Null => Ok(pad(spec, "null".into())),
            Arg::Long(v) => {
                let digits = v.unsigned_abs().to_string();
                let digits = if spec.group { grouped(&digits) } else { digits };
                Ok(signed(spec, *v < 0, digits))
            }
            _ => Err(mismatch(spec, arg)),
        },
        c @ ('o' | 'x') => match arg {
            Arg::Null => Ok(pad(spec, "null".into())),
            Arg::Long(v) => {
                // A negative Long shows its 64 bits, as Java does.
                let bits = *v as i64 as u64;
                let digits = if c == 'o' {
                    format!("{bits:o}")
                } else {
                    format!("{bits:x}")
                };
                let prefix = match (spec.alternate, c) {
                    (true, 'o') => "0",
                    (true, _) => "0x",
                    _ => "",
                };
                let mut body = format!("{prefix}{digits}");
                if spec.zero
                    && let Some(w) = spec.width
                    && body.len() < w
                {
                    body = format!("{prefix}{}{digits}", "0".repeat(w - body.len()));
                }
                Ok(pad(spec, cased(body)))
            }
            _ => Err(mismatch(spec, arg)),
        },
        c @ ('e' | 'f' | 'g') => {
            let (negative, digits) = match arg {
                Arg::Null => return Ok(pad(spec, "null".into())),
                Arg::Double(v) if v.is_nan() => return Ok(pad(spec, cased("NaN".into()))),
                Arg::Double(v) if v.is_infinite() => {
                    let plain = Spec {
                        zero: false,
                        ..spec.clone()
                    };
                    return Ok(cased(signed(&plain, *v < 0.0, "Infinity".into())));
                }
                Arg::Double(v) => (
                    v.is_sign_negative() && *v != 0.0,
                    Digits::parse(&format!("{:e}", v.abs())),
                ),
                Arg::Decimal(d) => (d.starts_with('-'), Digits::parse(d.trim_start_matches('-'))),
                _ => return Err(mismatch(spec, arg)),
            };
            let precision = spec.precision.unwrap_or(6);
            let body = match c {
                'f' => fixed_text(spec, digits, precision),
                'e' => scientific_text(digits, precision),
                _ => {
                    // %g: scientific outside 10^-4 ≤ x < 10^precision (after rounding).
                    let p = precision.max(1);
                    let mut probe = Digits {
                        digits: digits.digits.clone(),
                        exp: digits.exp,
                    };
                    probe.round(p as i32);
                    let exp = if probe.digits.is_empty() {
                        0
                    } else {
                        probe.exp - 1
                    };
                    if !probe.digits.is_empty() && (exp < -4 || exp >= p as i32) {
                        scientific_text(digits, p - 1)
                    } else {
                        fixed_text(spec, digits, (p as i32 - 1 - exp).max(0) as usize)
                    }
                }
            };
            Ok(cased(signed(spec, negative, body)))
        }
        other => Err(format!(
            "UnknownFormatConversionException: Conversion = '{other}'"
        )),
    }
}

fn fixed_text(spec: &Spec, digits: Digits, precision: usize) -> String {
    let (int, frac) = digits.fixed(precision);
    let int = if spec.group { grouped(&int) } else { int };
    if precision == 0 {
        if spec.alternate {
            format!("{int}.")
        } else {
            int
        }
    } else {
        format!("{int}.{frac}")
    }
}

fn scientific_text(digits: Digits, precision: usize) -> String {
    let (mantissa, exp) = digits.scientific(precision);
    let sign = if exp < 0 { '-' } else { '+' };
    format!("{mantissa}e{sign}{:02}", exp.unsigned_abs())
}

const MONTHS: [&str; 12] = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
];
const DAYS: [&str; 7] = [
    "Monday",
    "Tuesday",
    "Wednesday",
    "Thursday",
    "Friday",
    "Saturday",
    "Sunday",
];

/// A `%t` conversion of a date, a timestamp or epoch milliseconds (a Long).
fn time(spec: &Spec, arg: &Arg) -> Result<String, String> {
    let (t, zone) = match arg {
        Arg::Null => return Ok("null".into()),
        Arg::Date(d) => (d.and_hms_opt(0, 0, 0).unwrap_or_default(), None),
        Arg::DateTime(t, zone) => (*t, zone.clone()),
        Arg::Long(ms) => {
            let ms =
                i64::try_from(*ms).map_err(|_| "epoch milliseconds out of range".to_string())?;
            match chrono::DateTime::from_timestamp_millis(ms) {
                Some(t) => (t.naive_utc(), Some("UTC".to_string())),
                None => return Err("epoch milliseconds out of range".into()),
            }
        }
        _ => return Err(mismatch(spec, arg)),
    };
    let date_only = matches!(arg, Arg::Date(_));
    let needs_time = |c: char| {
        if date_only {
            Err(format!(
                "UnsupportedTemporalTypeException: Unsupported field for %t{c} of a date"
            ))
        } else {
            Ok(())
        }
    };
    let c = spec.conversion;
    let month = MONTHS[t.month0() as usize];
    let day = DAYS[t.weekday().num_days_from_monday() as usize];
    let hour12 = match t.hour() % 12 {
        0 => 12,
        h => h,
    };
    let am_pm = if t.hour() < 12 { "am" } else { "pm" };
    Ok(match c {
        'Y' => format!("{:04}", t.year()),
        'y' => format!("{:02}", t.year().rem_euclid(100)),
        'C' => format!("{:02}", t.year().div_euclid(100)),
        'm' => format!("{:02}", t.month()),
        'd' => format!("{:02}", t.day()),
        'e' => t.day().to_string(),
        'j' => format!("{:03}", t.ordinal()),
        'B' => month.into(),
        'b' | 'h' => month[..3].into(),
        'A' => day.into(),
        'a' => day[..3].into(),
        'F' => t.format("%Y-%m-%d").to_string(),
        'D' => t.format("%m/%d/%y").to_string(),
        _ => {
            needs_time(c)?;
            match c {
                'H' => format!("{:02}", t.hour()),
                'I' => format!("{hour12:02}"),
                'k' => t.hour().to_string(),
                'l' => hour12.to_string(),
                'M' => format!("{:02}", t.minute()),
                'S' => format!("{:02}", t.second()),
                'L' => format!("{:03}", t.nanosecond() / 1_000_000),
                'N' => format!("{:09}", t.nanosecond()),
                'p' => am_pm.into(),
                'T' => t.format("%H:%M:%S").to_string(),
                'R' => t.format("%H:%M").to_string(),
                'r' => format!(
                    "{hour12:02}:{:02}:{:02} {}",
                    t.minute(),
                    t.second(),
                    am_pm.to_uppercase()
                ),
                'Z' => zone.unwrap_or_default(),
                'c' => format!(
                    "{} {} {:02} {} {} {}",
                    &day[..3],
                    &month[..3],
                    t.day(),
                    t.format("%H:%M:%S"),
                    zone.unwrap_or_default(),
                    t.year()
                ),
                other => {
                    return Err(format!(
                        "UnknownFormatConversionException: Conversion = 't{other}'"
                    ));
                }
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(fmt: &str, args: &[Arg]) -> String {
        format(fmt, args).unwrap_or_else(|e| format!("error: {e}"))
    }

    #[test]
    fn the_docs_examples() {
        assert_eq!(f("%s%%", &[Arg::Long(123)]), "123%");
        assert_eq!(f("%.5f", &[Arg::Double(std::f64::consts::PI)]), "3.14159");
        assert_eq!(f("%03d", &[Arg::Long(8)]), "008");
        assert_eq!(f("%,.2f", &[Arg::Double(1234567.89)]), "1,234,567.89");
        assert_eq!(
            f(
                "%-7s,%7s",
                &[Arg::Text("hello".into()), Arg::Text("world".into())]
            ),
            "hello  ,  world"
        );
        let abc = [
            Arg::Text("a".into()),
            Arg::Text("b".into()),
            Arg::Text("c".into()),
        ];
        assert_eq!(f("%2$s %3$s %1$s", &abc), "b c a");
        let day = Arg::Date(NaiveDate::from_ymd_opt(2006, 7, 4).unwrap_or_default());
        assert_eq!(
            f("%1$tA, %1$tB %1$te, %1$tY", &[day]),
            "Tuesday, July 4, 2006"
        );
    }

    #[test]
    fn numbers_as_java_prints_them() {
        assert_eq!(f("%.1f", &[Arg::Double(0.15)]), "0.2");
        assert_eq!(f("%.2f", &[Arg::Decimal("-2.345".into())]), "-2.35");
        assert_eq!(f("%e", &[Arg::Double(12.3456)]), "1.234560e+01");
        assert_eq!(f("%.2e", &[Arg::Double(0.000123)]), "1.23e-04");
        assert_eq!(f("%g", &[Arg::Double(12.3456)]), "12.3456");
        assert_eq!(f("%(,d", &[Arg::Long(-1234567)]), "(1,234,567)");
        assert_eq!(
            f(
                "%+d %x %#o %X",
                &[Arg::Long(5), Arg::Long(255), Arg::Long(8), Arg::Long(-1)]
            ),
            "+5 ff 010 FFFFFFFFFFFFFFFF"
        );
        assert_eq!(
            f(
                "%s %s %s",
                &[Arg::Double(1e10), Arg::Double(0.5), Arg::Null]
            ),
            "1.0E10 0.5 null"
        );
        assert_eq!(
            f("%08.3f|%-8d|", &[Arg::Double(-1.23456), Arg::Long(42)]),
            "-001.235|42      |"
        );
        assert_eq!(f("%.9f", &[Arg::Double(0.1)]), "0.100000000");
        assert_eq!(f("%.0f %.0f", &[Arg::Double(2.5), Arg::Double(0.4)]), "3 0");
    }

    #[test]
    fn formats_that_do_not_fit_say_why() {
        assert_eq!(
            f("%d", &[Arg::Double(1.5)]),
            "error: IllegalFormatConversionException: d != java.lang.Double"
        );
        assert_eq!(
            f("%s %s", &[Arg::Long(1)]),
            "error: MissingFormatArgumentException: Format specifier '%s'"
        );
        assert_eq!(
            f("%q", &[Arg::Long(1)]),
            "error: UnknownFormatConversionException: Conversion = 'q'"
        );
        assert!(f("%99999s", &[Arg::Long(1)]).starts_with("error: "));
    }
}
