//! Role calls by name: the ranges that mark a worker's role call, in both of verl's namings, and
//! the class (rollout / log-prob / update / ...) the per-step breakdown groups them into.
//!
//! verl before 0.9 (and rlprof's own collections) name a role call by the worker method:
//! `generate_sequences`, `compute_log_prob`, `compute_ref_log_prob`, `update_actor`,
//! `compute_values`, `update_critic`, `compute_rm_score`. verl 0.9.1 names its mstx / NVTX
//! ranges by the stage label instead (`verl/workers/engine_workers.py`,
//! `verl/utils/profiler/mstx_profile.py`): `rollout` (the agent loop), `async_rollout`,
//! `actor_compute_log_prob`, `ref_compute_log_prob`, `actor_update`, `compute_values`,
//! `critic_update`, `compute_rm_score`; and rlprof's discrete collections are named by the same
//! labels (`rollout_generate`, ...). Every reader classifies a host range with one of these
//! names as a [`Track::RoleCall`](crate::model::Track::RoleCall), whatever domain or category
//! carries it; `train_batch` and `mini_batch{i}` are the update's inner ranges, not role calls.

use serde::Serialize;

/// What a role call does, as the per-step breakdown groups them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RoleClass {
    /// Generating the rollouts.
    Rollout,
    /// A forward-only log-prob pass (the actor's old log-probs, the reference's).
    LogProb,
    /// The actor's update.
    Update,
    /// The critic's value pass.
    Values,
    /// The critic's update.
    CriticUpdate,
    /// The reward model.
    Reward,
}

/// Every role-call name, in both namings, with its class.
pub const ROLE_CALLS: [(&str, RoleClass); 14] = [
    ("generate_sequences", RoleClass::Rollout),
    ("rollout", RoleClass::Rollout),
    ("async_rollout", RoleClass::Rollout),
    ("rollout_generate", RoleClass::Rollout),
    ("compute_log_prob", RoleClass::LogProb),
    ("compute_ref_log_prob", RoleClass::LogProb),
    ("actor_compute_log_prob", RoleClass::LogProb),
    ("ref_compute_log_prob", RoleClass::LogProb),
    ("update_actor", RoleClass::Update),
    ("actor_update", RoleClass::Update),
    ("compute_values", RoleClass::Values),
    ("update_critic", RoleClass::CriticUpdate),
    ("critic_update", RoleClass::CriticUpdate),
    ("compute_rm_score", RoleClass::Reward),
];

/// The class of a role call's name, `None` for any other name.
///
/// ```
/// use rlprof_report::roles::{RoleClass, role_class};
/// assert_eq!(role_class("actor_update"), Some(RoleClass::Update));
/// assert_eq!(role_class("update_actor"), Some(RoleClass::Update));
/// assert_eq!(role_class("train_batch"), None);
/// ```
pub fn role_class(name: &str) -> Option<RoleClass> {
    ROLE_CALLS
        .iter()
        .find(|(n, _)| *n == name)
        .map(|&(_, class)| class)
}

/// verl 0.9.1's stage labels (`DistProfiler.annotate(role=...)`, rlprof's own range names):
/// the role-call names that are not a worker method's (`compute_values` and `compute_rm_score`
/// are both).
const STAGE_LABELS: [&str; 7] = [
    "rollout",
    "async_rollout",
    "rollout_generate",
    "actor_compute_log_prob",
    "ref_compute_log_prob",
    "actor_update",
    "critic_update",
];

/// Whether `name` is one of verl 0.9.1's stage labels (a trace naming its stages so has its
/// trainer phases under the method names: `update_actor` there is a phase, not a call).
pub fn is_stage_label(name: &str) -> bool {
    STAGE_LABELS.contains(&name)
}

/// Whether `name` marks a role call.
pub fn is_role_call(name: &str) -> bool {
    role_class(name).is_some()
}
