//! Who may do what, and what they see: privileges (GRANT, DENY, REVOKE, roles, owners), row
//! filters, column masks and tags, column privileges, and Ranger's policies in place of SQE's own.

pub mod column_masks;
pub mod column_privileges;
pub mod model;
pub mod ranger;
pub mod row_filters;
