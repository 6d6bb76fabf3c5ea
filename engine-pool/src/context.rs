//! One statement's view of the engine: who runs it, and the parts of the engine its handler may
//! use. The engine makes one for each statement and hands it to the statement's handler (DDL,
//! writes, views, ATTACH, the governance statements); a handler reaches nothing else.

use sqe_sessions::Session;

use crate::catalog::mounts::Mounts;
use crate::files::policy::FilePolicy;
use crate::governance::Governance;
use crate::planner::Planner;
use crate::secrets::Secrets;

pub(crate) struct Ctx<'a> {
    /// The caller and their session.
    pub session: &'a Session,
    /// The catalogs, as the caller reaches them.
    pub mounts: &'a Mounts,
    /// Who may do what, and what they see.
    pub governance: &'a Governance,
    /// From a statement to its checked plan.
    pub planner: &'a Planner,
    /// The caller's secrets.
    pub secrets: &'a Secrets,
    /// Which paths files may be read from and written to.
    pub files: &'a FilePolicy,
    /// The shortest retention maintenance may be given (write/maintain.rs).
    pub min_retention: std::time::Duration,
}
