//! Flight's session actions (`SetSessionOptions`, `GetSessionOptions`, `CloseSession`), whose
//! messages arrow-flight 58 does not generate. Field numbers are those of Arrow's Flight.proto.

use std::collections::HashMap;

pub const SET_SESSION_OPTIONS: &str = "SetSessionOptions";
pub const GET_SESSION_OPTIONS: &str = "GetSessionOptions";
pub const CLOSE_SESSION: &str = "CloseSession";
pub const CANCEL_FLIGHT_INFO: &str = "CancelFlightInfo";

/// The cookie that carries the session id, as Arrow's own servers name it.
pub const SESSION_COOKIE: &str = "arrow_flight_session_id";

#[derive(Clone, PartialEq, prost::Message)]
pub struct StringListValue {
    #[prost(string, repeated, tag = "1")]
    pub values: Vec<String>,
}

/// The variants keep Flight.proto's names.
#[derive(Clone, PartialEq, prost::Oneof)]
#[allow(clippy::enum_variant_names)]
pub enum OptionValue {
    #[prost(string, tag = "1")]
    StringValue(String),
    #[prost(bool, tag = "2")]
    BoolValue(bool),
    #[prost(sfixed64, tag = "3")]
    Int64Value(i64),
    #[prost(double, tag = "4")]
    DoubleValue(f64),
    #[prost(message, tag = "5")]
    StringListValue(StringListValue),
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct SessionOptionValue {
    #[prost(oneof = "OptionValue", tags = "1, 2, 3, 4, 5")]
    pub option_value: Option<OptionValue>,
}

impl SessionOptionValue {
    pub fn string(s: impl Into<String>) -> Self {
        Self {
            option_value: Some(OptionValue::StringValue(s.into())),
        }
    }
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct SetSessionOptionsRequest {
    #[prost(map = "string, message", tag = "1")]
    pub session_options: HashMap<String, SessionOptionValue>,
}

/// `SetSessionOptionsResult.ErrorValue`.
pub const INVALID_NAME: i32 = 1;
pub const INVALID_VALUE: i32 = 2;

#[derive(Clone, PartialEq, prost::Message)]
pub struct SetSessionOptionsError {
    #[prost(int32, tag = "1")]
    pub value: i32,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct SetSessionOptionsResult {
    #[prost(map = "string, message", tag = "1")]
    pub errors: HashMap<String, SetSessionOptionsError>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct GetSessionOptionsResult {
    #[prost(map = "string, message", tag = "1")]
    pub session_options: HashMap<String, SessionOptionValue>,
}

/// `CloseSessionResult.Status`.
pub const CLOSED: i32 = 1;

#[derive(Clone, PartialEq, prost::Message)]
pub struct CloseSessionResult {
    #[prost(int32, tag = "1")]
    pub status: i32,
}

/// The session id from a `cookie` header, if it carries one.
pub fn session_id_from_cookies(header: &str) -> Option<&str> {
    header.split(';').find_map(|pair| {
        let (name, value) = pair.trim().split_once('=')?;
        (name == SESSION_COOKIE && !value.is_empty()).then_some(value)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use prost::Message;

    #[test]
    fn the_session_cookie_is_found_among_others() {
        assert_eq!(
            session_id_from_cookies("a=1; arrow_flight_session_id=abc; b=2"),
            Some("abc")
        );
        assert_eq!(session_id_from_cookies("a=1"), None);
        assert_eq!(session_id_from_cookies("arrow_flight_session_id="), None);
    }

    #[test]
    fn options_round_trip() {
        let mut request = SetSessionOptionsRequest::default();
        request
            .session_options
            .insert("catalog".into(), SessionOptionValue::string("lake"));
        let bytes = request.encode_to_vec();
        let back = SetSessionOptionsRequest::decode(bytes.as_slice()).expect("decodes");
        assert_eq!(back, request);
    }
}
