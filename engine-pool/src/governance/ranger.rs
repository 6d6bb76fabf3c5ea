//! Apache Ranger's policies for a Hive service, downloaded from Ranger's admin server
//! (`GET …/service/plugins/policies/download/{service}`), in place of SQE's own GRANTs, row filters
//! and masks for the catalogs they are configured for (`[access] engine = "ranger"`).
//!
//! The policies are downloaded at start and every `refresh` after (`lastKnownVersion` asks for a
//! change only; 304 means none). A failed download keeps the last policies, until `grace` has passed
//! since the last download that worked: from then on, and until one works again, every statement on
//! those catalogs is refused (closed, never open).
//!
//! What is read of Ranger's model, with a Hive service's resources: `database` is the schema,
//! `table` the table, `column` the column; values may hold `*` and `?`; `isExcludes` is honoured.
//!
//! - Access policies (`policyType` 0): deny items (less their exceptions) win over allow items
//!   (less theirs); nothing allowed is denied. Accesses: `select` (SELECT), `update` (INSERT,
//!   UPDATE, DELETE), `create`, `drop`, `alter`, and `all`. Items name users, groups and roles; a
//!   caller's groups and roles are their token's roles; the group `public` is everyone. A policy
//!   whose `column` is not `*` decides nothing on its own for a whole table, except a deny, which
//!   denies the table (column-level Ranger access is not read yet: closed).
//! - Row filter policies (2): the first item that names the caller gives the table's filter.
//! - Masking policies (1): for each column, the first item that names the caller gives its mask:
//!   `MASK` (letters and digits as `x`), `MASK_SHOW_LAST_4`, `MASK_SHOW_FIRST_4`, `MASK_HASH`,
//!   `MASK_NULL`, `MASK_DATE_SHOW_YEAR`, `CUSTOM` (its `valueExpr`, `{col}` standing for the column)
//!   and `MASK_NONE`. Masks by column name, as Ranger keeps them.
//!
//! No Ranger server runs in SQE's tests: they serve Ranger's download format from a fixture.

use std::collections::HashMap;
use std::sync::{Arc, RwLock, Weak};
use std::time::{Duration, Instant};

use serde::Deserialize;
use sqe_sessions::{ErrorCode, SqeError, SqeResult};

use crate::governance::column_masks::Mask;
use crate::governance::terms::{Object, Privilege, Who};

/// `[access.ranger]`.
#[derive(Debug, Clone)]
pub struct RangerConfig {
    /// The policy download URL of a Hive service.
    pub policy_url: String,
    /// The SQE catalogs the policies govern.
    pub catalogs: Vec<String>,
    pub refresh: Duration,
    pub grace: Duration,
    /// Basic credentials for the download, if Ranger asks for them.
    pub basic: Option<(String, String)>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct ServicePolicies {
    policy_version: Option<i64>,
    policies: Vec<Policy>,
    /// What SQE does not read; a download that uses them is refused (closed).
    security_zones: Option<serde_json::Value>,
    tag_policies: Option<serde_json::Value>,
}

/// The largest download read.
const MAX_DOWNLOAD: usize = 64 << 20;

#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct Policy {
    #[serde(default = "yes")]
    is_enabled: bool,
    policy_type: i32,
    resources: HashMap<String, Resource>,
    policy_items: Vec<Item>,
    deny_policy_items: Vec<Item>,
    allow_exceptions: Vec<Item>,
    deny_exceptions: Vec<Item>,
    data_mask_policy_items: Vec<MaskItem>,
    row_filter_policy_items: Vec<FilterItem>,
    /// Everyone not allowed by this policy is denied.
    is_deny_all_else: bool,
    /// When the policy holds: SQE does not read schedules, so a scheduled allow never holds and a
    /// scheduled deny always does.
    validity_schedules: Vec<serde_json::Value>,
    conditions: Vec<serde_json::Value>,
}

fn yes() -> bool {
    true
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct Resource {
    values: Vec<String>,
    is_excludes: bool,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct Item {
    accesses: Vec<Access>,
    users: Vec<String>,
    groups: Vec<String>,
    roles: Vec<String>,
    /// Conditions (IP ranges, …) SQE does not read: an allow with conditions never holds, a deny
    /// with conditions always does.
    conditions: Vec<serde_json::Value>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct Access {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default = "yes")]
    is_allowed: bool,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct MaskItem {
    #[serde(flatten)]
    item: Item,
    data_mask_info: MaskInfo,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct MaskInfo {
    data_mask_type: String,
    value_expr: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct FilterItem {
    #[serde(flatten)]
    item: Item,
    row_filter_info: FilterInfo,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct FilterInfo {
    filter_expr: String,
}

/// `*` any run of characters, `?` any one; `pattern` and `value` in lower case (Hive's names
/// compare case aside; patterns are lowered once per download).
fn wildcard(pattern: &str, value: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let v: Vec<char> = value.chars().collect();
    let (mut i, mut j, mut star, mut mark) = (0, 0, None, 0);
    while j < v.len() {
        if i < p.len() && (p[i] == '?' || p[i] == v[j]) {
            i += 1;
            j += 1;
        } else if i < p.len() && p[i] == '*' {
            star = Some(i);
            mark = j;
            i += 1;
        } else if let Some(s) = star {
            i = s + 1;
            mark += 1;
            j = mark;
        } else {
            return false;
        }
    }
    p[i..].iter().all(|c| *c == '*')
}

impl Resource {
    fn matches(&self, value: &str) -> bool {
        self.values.iter().any(|p| wildcard(p, value)) != self.is_excludes
    }

    fn is_all(&self) -> bool {
        !self.is_excludes && self.values.iter().any(|v| v == "*")
    }
}

impl Item {
    fn names(&self, who: &Who) -> bool {
        self.names_anyway(who) && self.conditions.is_empty()
    }

    /// Whether the item names the caller, its conditions aside (a deny's hold regardless).
    fn names_anyway(&self, who: &Who) -> bool {
        self.users.contains(&who.name)
            || self
                .groups
                .iter()
                .any(|g| g == "public" || who.roles.contains(g))
            || self.roles.iter().any(|r| who.roles.contains(r))
    }

    fn grants(&self, access: &str) -> bool {
        self.accesses
            .iter()
            .any(|a| a.is_allowed && (a.kind == access || a.kind == "all"))
    }
}

fn access_of(privilege: Privilege) -> &'static str {
    match privilege {
        Privilege::Select => "select",
        Privilege::Insert | Privilege::Update | Privilege::Delete => "update",
        Privilege::Drop => "drop",
        Privilege::Create => "create",
        Privilege::Alter => "alter",
    }
}

/// One download of the policies.
#[derive(Debug, Default)]
pub(crate) struct RangerPolicies {
    policies: Vec<Policy>,
    /// The policies naming each database exactly, and those with a pattern or an exclusion (in
    /// download order both): a check walks only the policies that can be about its database.
    by_database: HashMap<String, Vec<usize>>,
    patterns: Vec<usize>,
}

impl RangerPolicies {
    fn new(policies: Vec<Policy>) -> Self {
        let mut by_database: HashMap<String, Vec<usize>> = HashMap::new();
        let mut patterns = Vec::new();
        for (i, p) in policies.iter().enumerate() {
            match p.resources.get("database") {
                Some(r) if !r.is_excludes && r.values.iter().all(|v| !v.contains(['*', '?'])) => {
                    for v in &r.values {
                        let list = by_database.entry(v.clone()).or_default();
                        if list.last() != Some(&i) {
                            list.push(i);
                        }
                    }
                }
                Some(_) => patterns.push(i),
                None => {}
            }
        }
        Self {
            policies,
            by_database,
            patterns,
        }
    }

    /// The enabled policies of `kind` on `object` (its database, and its table if it is one),
    /// over Hive's database, table and column resources only (a UDF's or a URL's policy is about
    /// something else).
    fn on<'a>(&'a self, kind: i32, object: &Object) -> impl Iterator<Item = &'a Policy> {
        let schema = object.schema.to_lowercase();
        let table = object.table.as_ref().map(|t| t.to_lowercase());
        let mut candidates: Vec<usize> = self
            .by_database
            .get(&schema)
            .into_iter()
            .flatten()
            .chain(&self.patterns)
            .copied()
            .collect();
        candidates.sort_unstable();
        candidates.dedup();
        candidates
            .into_iter()
            .map(move |i| &self.policies[i])
            .filter(move |p| {
                let all_or_none = |key: &str| p.resources.get(key).is_none_or(Resource::is_all);
                p.is_enabled
                    && p.policy_type == kind
                    && p.resources
                        .keys()
                        .all(|k| matches!(k.as_str(), "database" | "table" | "column"))
                    && p.resources
                        .get("database")
                        .is_some_and(|r| r.matches(&schema))
                    && match (&table, p.resources.get("table")) {
                        (Some(t), Some(r)) => r.matches(t),
                        // A database-level policy is about the database itself.
                        (None, None) => all_or_none("column"),
                        (None, Some(r)) => r.is_all() && all_or_none("column"),
                        (Some(_), None) => false,
                    }
            })
    }

    pub(crate) fn allows(&self, who: &Who, privilege: Privilege, object: &Object) -> bool {
        self.decides(who, access_of(privilege), object)
    }

    fn decides(&self, who: &Who, access: &str, object: &Object) -> bool {
        let mut allowed = false;
        for p in self.on(0, object) {
            let scheduled = !p.validity_schedules.is_empty() || !p.conditions.is_empty();
            let allows = !scheduled
                && p.policy_items
                    .iter()
                    .any(|i| i.names(who) && i.grants(access))
                && !p
                    .allow_exceptions
                    .iter()
                    .any(|i| i.names_anyway(who) && i.grants(access));
            let denies = p
                .deny_policy_items
                .iter()
                .any(|i| i.names_anyway(who) && i.grants(access))
                && !p
                    .deny_exceptions
                    .iter()
                    .any(|i| i.names(who) && i.grants(access));
            if denies || (p.is_deny_all_else && !allows) {
                return false;
            }
            // A policy on some columns only decides nothing for the whole table.
            allowed |= allows && p.resources.get("column").is_none_or(Resource::is_all);
        }
        allowed
    }

    /// Whether the caller holds any access to `object`.
    pub(crate) fn visible(&self, who: &Who, object: &Object) -> bool {
        ["select", "update", "create", "drop", "alter"]
            .iter()
            .any(|a| self.decides(who, a, object))
    }

    /// Whether any masking policy on `object` names the caller (whatever the column).
    pub(crate) fn masks_any(&self, who: &Who, object: &Object) -> bool {
        self.on(1, object)
            .flat_map(|p| &p.data_mask_policy_items)
            .any(|i| i.item.names_anyway(who))
    }

    /// The row filter on `object` for the caller.
    pub(crate) fn row_filter(&self, who: &Who, object: &Object) -> Option<String> {
        self.on(2, object)
            .flat_map(|p| &p.row_filter_policy_items)
            .find(|i| i.item.names_anyway(who))
            .map(|i| match i.item.conditions.is_empty() {
                true => i.row_filter_info.filter_expr.trim().to_string(),
                // A filter with conditions SQE does not read lets no row through.
                false => "FALSE".to_string(),
            })
            .filter(|e| !e.is_empty())
    }

    /// The caller's mask on `column` of `object`, if any.
    pub(crate) fn mask(&self, who: &Who, object: &Object, column: &str) -> Option<Mask> {
        let lower = column.to_lowercase();
        let item = self
            .on(1, object)
            .filter(|p| p.resources.get("column").is_some_and(|r| r.matches(&lower)))
            .flat_map(|p| &p.data_mask_policy_items)
            .find(|i| i.item.names_anyway(who))?;
        // A mask with conditions SQE does not read shows nothing.
        if !item.item.conditions.is_empty() {
            return Some(Mask::Null);
        }
        let info = &item.data_mask_info;
        Some(match info.data_mask_type.as_str() {
            "MASK_NONE" => return None,
            "MASK" => Mask::ShowFirst(0),
            "MASK_SHOW_LAST_4" => Mask::ShowLast(4),
            "MASK_SHOW_FIRST_4" => Mask::ShowFirst(4),
            "MASK_HASH" => Mask::Hash,
            "MASK_DATE_SHOW_YEAR" => Mask::Truncate("year"),
            "CUSTOM" => match &info.value_expr {
                Some(e) if !e.trim().is_empty() => {
                    let quoted = sqe_sessions::quote_identifier(column);
                    Mask::Custom(e.replace("{col}", &quoted))
                }
                _ => Mask::Null,
            },
            // MASK_NULL, and any type this build does not know: nothing shown.
            _ => Mask::Null,
        })
    }
}

struct State {
    policies: Option<Arc<RangerPolicies>>,
    version: Option<i64>,
    last_success: Option<Instant>,
    last_error: Option<String>,
}

/// The downloaded policies and their refresher.
pub(crate) struct Ranger {
    config: RangerConfig,
    http: reqwest::Client,
    state: RwLock<State>,
}

impl std::fmt::Debug for Ranger {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ranger")
            .field("policy_url", &self.config.policy_url)
            .finish()
    }
}

impl Ranger {
    /// Starts downloading (on the current Tokio runtime, for as long as the engine lives).
    pub(crate) fn start(config: RangerConfig) -> SqeResult<Arc<Self>> {
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(10))
            .build()
            .map_err(|e| SqeError::internal(format!("ranger client: {e}")))?;
        let ranger = Arc::new(Self {
            config,
            http,
            state: RwLock::new(State {
                policies: None,
                version: None,
                last_success: None,
                last_error: None,
            }),
        });
        let runtime = tokio::runtime::Handle::try_current().map_err(|_| {
            SqeError::invalid("[access] engine = \"ranger\" needs the engine opened on a runtime")
        })?;
        let weak: Weak<Self> = Arc::downgrade(&ranger);
        let refresh = ranger.config.refresh;
        runtime.spawn(async move {
            loop {
                let Some(ranger) = weak.upgrade() else {
                    return;
                };
                ranger.download().await;
                drop(ranger);
                tokio::time::sleep(refresh).await;
            }
        });
        Ok(ranger)
    }

    pub(crate) fn governs(&self, catalog: &str) -> bool {
        self.config.catalogs.iter().any(|c| c == catalog)
    }

    /// The policies in force: the last download, unless it is older than the grace period.
    pub(crate) fn current(&self) -> SqeResult<Arc<RangerPolicies>> {
        let state = self.state.read().unwrap_or_else(|p| p.into_inner());
        match (&state.policies, state.last_success) {
            (Some(p), Some(at)) if at.elapsed() <= self.config.grace => Ok(Arc::clone(p)),
            _ => Err(SqeError::new(
                ErrorCode::PermissionDenied,
                format!(
                    "Access Denied: the Ranger policies are unavailable ({})",
                    state.last_error.as_deref().unwrap_or("not downloaded yet")
                ),
            )),
        }
    }

    async fn download(&self) {
        let version = self.state.read().unwrap_or_else(|p| p.into_inner()).version;
        let mut request = self.http.get(&self.config.policy_url);
        if let Some(v) = version {
            request = request.query(&[("lastKnownVersion", v.to_string())]);
        }
        if let Some((user, password)) = &self.config.basic {
            request = request.basic_auth(user, Some(password));
        }
        let outcome = match request.send().await {
            Err(e) => Err(format!("download failed: {e}")),
            Ok(r) if r.status() == reqwest::StatusCode::NOT_MODIFIED => Ok(None),
            Ok(r) if !r.status().is_success() => Err(format!("download answered {}", r.status())),
            Ok(r) if r.content_length().is_some_and(|n| n > MAX_DOWNLOAD as u64) => {
                Err(format!("the download is larger than {MAX_DOWNLOAD} bytes"))
            }
            Ok(r) => match read_capped(r).await {
                Err(e) => Err(e),
                Ok(body) => match serde_json::from_slice::<ServicePolicies>(&body) {
                    Err(e) => Err(format!("the download is not Ranger's policy format: {e}")),
                    Ok(p) if p.security_zones.as_ref().is_some_and(is_set)
                        || p.tag_policies.as_ref().is_some_and(is_set) =>
                    {
                        Err("the download uses security zones or tag policies, which SQE does not read".to_string())
                    }
                    Ok(mut p) => {
                        for policy in &mut p.policies {
                            for resource in policy.resources.values_mut() {
                                for v in &mut resource.values {
                                    *v = v.to_lowercase();
                                }
                            }
                        }
                        Ok(Some(p))
                    }
                },
            },
        };
        let mut state = self.state.write().unwrap_or_else(|p| p.into_inner());
        match outcome {
            Ok(None) => state.last_success = Some(Instant::now()),
            Ok(Some(p)) => {
                state.version = p.policy_version;
                state.policies = Some(Arc::new(RangerPolicies::new(p.policies)));
                state.last_success = Some(Instant::now());
                state.last_error = None;
            }
            Err(e) => {
                tracing::warn!(url = %self.config.policy_url, error = %e, "ranger policies");
                state.last_error = Some(e);
            }
        }
    }
}

/// Whether a JSON value holds anything (not null, not empty).
fn is_set(v: &serde_json::Value) -> bool {
    match v {
        serde_json::Value::Null => false,
        serde_json::Value::Object(o) => !o.is_empty() && o.values().any(is_set),
        serde_json::Value::Array(a) => !a.is_empty(),
        _ => true,
    }
}

/// The body, refused past [`MAX_DOWNLOAD`] bytes.
async fn read_capped(mut response: reqwest::Response) -> Result<Vec<u8>, String> {
    let mut body = Vec::new();
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(|e| format!("download failed: {e}"))?
    {
        if body.len() + chunk.len() > MAX_DOWNLOAD {
            return Err(format!("the download is larger than {MAX_DOWNLOAD} bytes"));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn policies_are_found_through_the_index_whatever_names_their_database() {
        let download = r#"{"policies": [
            {"policyType": 0, "resources": {"database": {"values": ["sales"]}, "table": {"values": ["*"]}},
             "policyItems": [{"accesses": [{"type": "select"}], "users": ["a"]}]},
            {"policyType": 0, "resources": {"database": {"values": ["s*"]}, "table": {"values": ["*"]}},
             "denyPolicyItems": [{"accesses": [{"type": "select"}], "users": ["b"]}],
             "policyItems": [{"accesses": [{"type": "select"}], "users": ["b"]}]},
            {"policyType": 0, "resources": {"database": {"values": ["sales"], "isExcludes": true},
             "table": {"values": ["*"]}},
             "policyItems": [{"accesses": [{"type": "select"}], "users": ["c"]}]}
        ]}"#;
        let parsed: ServicePolicies =
            serde_json::from_str(download).unwrap_or_else(|e| panic!("{e}"));
        let policies = RangerPolicies::new(parsed.policies);
        let who = |name: &str| Who {
            name: name.to_string(),
            roles: Default::default(),
            admin: false,
        };
        let orders = Object::table("iceberg", "Sales", "orders");
        let pay = Object::table("iceberg", "hr", "pay");
        let allows =
            |user: &str, object: &Object| policies.allows(&who(user), Privilege::Select, object);
        assert!(allows("a", &orders));
        assert!(!allows("b", &orders), "the pattern's deny wins");
        assert!(!allows("c", &orders), "excluded");
        assert!(allows("c", &pay));
        assert!(!allows("a", &pay));
    }

    #[test]
    fn wildcards_match_as_ranger_does() {
        assert!(wildcard("*", "anything"));
        assert!(wildcard("cust*", "customers"));
        assert!(wildcard("c?t", "cat"));
        assert!(!wildcard("c?t", "cart"));
        assert!(!wildcard("orders", "orders2"));
        assert!(wildcard("*_pii", "users_pii"));
    }
}
