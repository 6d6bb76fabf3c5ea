//! Trino's words for a cast to an integer type that does not hold the value ("Out of range for
//! integer: 3000000000", as Trino's `BigintOperators.castToInteger` and its siblings say), for the
//! error module, which gives arrow's cast error ("Can't cast value 3000000000 to type Int32") in
//! them. Arrow's cast already fails there (DataFusion casts with `safe: false`; `TRY_CAST` and
//! `TRY(…)` give NULL): only the words differ. Integer arithmetic needs no rewording: its checked
//! operators (overflow.rs) raise Trino's messages themselves. It imports nothing of SQE's, so the
//! error module can depend on it.

/// Arrow's error for an integer that does not fit the integer type it is cast to, in Trino's
/// words; None for any other message (a double or text cast to an integer keeps arrow's).
pub(crate) fn out_of_range(message: &str) -> Option<String> {
    let (_, rest) = message.split_once("Can't cast value ")?;
    let (value, to) = rest.split_once(" to type ")?;
    let value: i128 = value.parse().ok()?;
    let name = match to.trim() {
        "Int8" => "tinyint",
        "Int16" => "smallint",
        "Int32" => "integer",
        "Int64" => "bigint",
        _ => return None,
    };
    Some(format!("Out of range for {name}: {value}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integer_casts_out_of_range() {
        assert_eq!(
            out_of_range("Can't cast value 3000000000 to type Int32").as_deref(),
            Some("Out of range for integer: 3000000000")
        );
        assert_eq!(
            out_of_range("Cast error: Can't cast value -129 to type Int8").as_deref(),
            Some("Out of range for tinyint: -129")
        );
        assert_eq!(
            out_of_range("Can't cast value 40000 to type Int16").as_deref(),
            Some("Out of range for smallint: 40000")
        );
        assert_eq!(
            out_of_range("Can't cast value 18446744073709551615 to type Int64").as_deref(),
            Some("Out of range for bigint: 18446744073709551615")
        );
        // A double out of range, another target type, another error: arrow's words.
        assert_eq!(
            out_of_range("Can't cast value 30000000000.0 to type Int32"),
            None
        );
        assert_eq!(out_of_range("Can't cast value 300 to type UInt8"), None);
        assert_eq!(out_of_range("Division by zero"), None);
    }
}
