//! The two value types SQE marks on top of Arrow's, which the engine's functions produce and every
//! protocol and the shell must recognise: a `timestamp with time zone` keeping a zone per value,
//! and Trino's JSON type. Kept here, the crate every front end already depends on, so that none of
//! them holds a copy of the other's definition.

use arrow_schema::{DataType, Field, Fields, TimeUnit};

/// The struct field of a [`zoned_type`] holding the instant, a timestamp in UTC.
pub const INSTANT: &str = "instant";
/// The struct field of a [`zoned_type`] holding the zone's name (`Europe/Berlin`, `+01:00`).
pub const ZONE: &str = "zone";

/// The Arrow extension type (canonical, on VARCHAR storage) marking a column as Trino's JSON type.
pub const JSON_EXTENSION: &str = "arrow.json";

/// A timestamp with a time zone per value: a struct of its instant (in `unit`, UTC) and its zone.
/// Arrow's own timestamp has one zone for a whole column; this one is for values whose zones differ
/// from row to row.
pub fn zoned_type(unit: TimeUnit) -> DataType {
    DataType::Struct(Fields::from(vec![
        Field::new(INSTANT, DataType::Timestamp(unit, Some("UTC".into())), true),
        Field::new(ZONE, DataType::Utf8, true),
    ]))
}

/// The unit of `t` when it is a [`zoned_type`]; `None` for any other type.
pub fn zoned_unit(t: &DataType) -> Option<TimeUnit> {
    let DataType::Struct(fields) = t else {
        return None;
    };
    match fields
        .iter()
        .map(|f| (f.name().as_str(), f.data_type()))
        .collect::<Vec<_>>()[..]
    {
        [
            (INSTANT, DataType::Timestamp(unit, Some(utc))),
            (ZONE, DataType::Utf8),
        ] if utc.as_ref() == "UTC" => Some(*unit),
        _ => None,
    }
}

/// Whether `field` carries Trino's JSON type (its extension name; the storage is text).
pub fn is_json_field(field: &Field) -> bool {
    field.extension_type_name() == Some(JSON_EXTENSION)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_zoned_type_is_recognised_and_nothing_else_is() {
        assert_eq!(
            zoned_unit(&zoned_type(TimeUnit::Millisecond)),
            Some(TimeUnit::Millisecond)
        );
        let swapped = DataType::Struct(Fields::from(vec![
            Field::new(ZONE, DataType::Utf8, true),
            Field::new(
                INSTANT,
                DataType::Timestamp(TimeUnit::Millisecond, Some("UTC".into())),
                true,
            ),
        ]));
        assert_eq!(zoned_unit(&swapped), None);
        let other_zone = DataType::Struct(Fields::from(vec![
            Field::new(
                INSTANT,
                DataType::Timestamp(TimeUnit::Millisecond, Some("+01:00".into())),
                true,
            ),
            Field::new(ZONE, DataType::Utf8, true),
        ]));
        assert_eq!(zoned_unit(&other_zone), None);
        let no_zone = DataType::Struct(Fields::from(vec![
            Field::new(INSTANT, DataType::Timestamp(TimeUnit::Second, None), true),
            Field::new(ZONE, DataType::Utf8, true),
        ]));
        assert_eq!(zoned_unit(&no_zone), None);
        assert_eq!(zoned_unit(&DataType::Utf8), None);
    }

    #[test]
    fn json_is_the_extension_name() {
        let plain = Field::new("j", DataType::Utf8, true);
        assert!(!is_json_field(&plain));
        let marked = plain.with_metadata(
            [(
                "ARROW:extension:name".to_string(),
                JSON_EXTENSION.to_string(),
            )]
            .into(),
        );
        assert!(is_json_field(&marked));
    }
}
