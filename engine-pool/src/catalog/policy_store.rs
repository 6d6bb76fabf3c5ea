//! The tables SQE keeps in a catalog's own database (SQLite or PostgreSQL) or in `[access] store`
//! for the governance part: privileges, owners, roles, row filters, column masks and tags, column
//! privileges, mask keys. The catalog side knows only how to hold them ([`PolicyDb`]); what they
//! mean is governance's.

use sqe_sessions::SqeResult;

/// A catalog's database, as the policy tables need it: text in, text out (`$1`, `$2`, …).
pub trait PolicyDb: Send + Sync {
    fn query(&self, sql: &str, args: &[&str]) -> SqeResult<Vec<Vec<Option<String>>>>;
    fn execute(&self, sql: &str, args: &[&str]) -> SqeResult<u64>;
}

/// SQE's tables in a catalog's database (pyiceberg ignores them).
pub const POLICY_TABLES: &str = "CREATE TABLE IF NOT EXISTS sqe_privileges (
        catalog_name VARCHAR(255) NOT NULL,
        schema_name VARCHAR(255) NOT NULL,
        table_name VARCHAR(255) NOT NULL,
        grantee_kind VARCHAR(8) NOT NULL,
        grantee VARCHAR(255) NOT NULL,
        privilege VARCHAR(16) NOT NULL,
        effect VARCHAR(8) NOT NULL,
        grant_option VARCHAR(5) NOT NULL,
        granted_by VARCHAR(255) NOT NULL,
        PRIMARY KEY (catalog_name, schema_name, table_name, grantee_kind, grantee, privilege, effect));
    CREATE TABLE IF NOT EXISTS sqe_owners (
        catalog_name VARCHAR(255) NOT NULL,
        schema_name VARCHAR(255) NOT NULL,
        table_name VARCHAR(255) NOT NULL,
        owner VARCHAR(255) NOT NULL,
        PRIMARY KEY (catalog_name, schema_name, table_name));
    CREATE TABLE IF NOT EXISTS sqe_roles (
        catalog_name VARCHAR(255) NOT NULL,
        role_name VARCHAR(255) NOT NULL,
        PRIMARY KEY (catalog_name, role_name));
    CREATE TABLE IF NOT EXISTS sqe_role_members (
        catalog_name VARCHAR(255) NOT NULL,
        role_name VARCHAR(255) NOT NULL,
        member VARCHAR(255) NOT NULL,
        PRIMARY KEY (catalog_name, role_name, member));
    CREATE TABLE IF NOT EXISTS sqe_row_filters (
        catalog_name VARCHAR(255) NOT NULL,
        schema_name VARCHAR(255) NOT NULL,
        table_name VARCHAR(255) NOT NULL,
        filter_name VARCHAR(255) NOT NULL,
        grantee_kind VARCHAR(8) NOT NULL,
        grantee VARCHAR(255) NOT NULL,
        expression VARCHAR(4000) NOT NULL,
        PRIMARY KEY (catalog_name, schema_name, table_name, filter_name));
    CREATE TABLE IF NOT EXISTS sqe_column_masks (
        catalog_name VARCHAR(255) NOT NULL,
        schema_name VARCHAR(255) NOT NULL,
        table_name VARCHAR(255) NOT NULL,
        field_id VARCHAR(16) NOT NULL,
        grantee_kind VARCHAR(8) NOT NULL,
        grantee VARCHAR(255) NOT NULL,
        mask_kind VARCHAR(16) NOT NULL,
        argument VARCHAR(4000) NOT NULL,
        PRIMARY KEY (catalog_name, schema_name, table_name, field_id, grantee_kind, grantee));
    CREATE TABLE IF NOT EXISTS sqe_column_privileges (
        catalog_name VARCHAR(255) NOT NULL,
        schema_name VARCHAR(255) NOT NULL,
        table_name VARCHAR(255) NOT NULL,
        field_id VARCHAR(16) NOT NULL,
        grantee_kind VARCHAR(8) NOT NULL,
        grantee VARCHAR(255) NOT NULL,
        effect VARCHAR(8) NOT NULL,
        granted_by VARCHAR(255) NOT NULL,
        PRIMARY KEY (catalog_name, schema_name, table_name, field_id, grantee_kind, grantee, effect));
    CREATE TABLE IF NOT EXISTS sqe_column_tags (
        catalog_name VARCHAR(255) NOT NULL,
        schema_name VARCHAR(255) NOT NULL,
        table_name VARCHAR(255) NOT NULL,
        field_id VARCHAR(16) NOT NULL,
        tag_name VARCHAR(255) NOT NULL,
        PRIMARY KEY (catalog_name, schema_name, table_name, field_id, tag_name));
    CREATE TABLE IF NOT EXISTS sqe_tag_masks (
        catalog_name VARCHAR(255) NOT NULL,
        tag_name VARCHAR(255) NOT NULL,
        grantee_kind VARCHAR(8) NOT NULL,
        grantee VARCHAR(255) NOT NULL,
        mask_kind VARCHAR(16) NOT NULL,
        argument VARCHAR(4000) NOT NULL,
        PRIMARY KEY (catalog_name, tag_name, grantee_kind, grantee));
    CREATE TABLE IF NOT EXISTS sqe_mask_keys (
        catalog_name VARCHAR(255) NOT NULL PRIMARY KEY,
        key_hex VARCHAR(128) NOT NULL);";
