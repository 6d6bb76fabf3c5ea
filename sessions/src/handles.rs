//! Handles for server-side state a client names again later (a Trino query's page URIs, Flight
//! tickets, prepared statements, sessions). Each is bound to the principal that made it, and is
//! unguessable besides: 244 random bits from the operating system, as 64 hex digits.

/// A new unguessable handle.
pub fn random_handle() -> String {
    format!(
        "{}{}",
        uuid::Uuid::new_v4().simple(),
        uuid::Uuid::new_v4().simple()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handles_are_long_and_distinct() {
        let (a, b) = (random_handle(), random_handle());
        assert_eq!(a.len(), 64);
        assert_ne!(a, b);
    }
}
