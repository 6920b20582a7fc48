//! Views of the snapshot that placement decisions need: free resources per node, which
//! nodes fit a task, and packing a gang onto the fewest nodes.
//!
//! A [`Ledger`] starts from the snapshot and is charged as the policy decides, so two
//! placements in one round never count the same free capacity twice (the host would
//! reject the second). It also knows where each task may run (`task.eligible`, the
//! host's eligibility sets): the helpers that take a task ([`Ledger::fits_task`],
//! [`Ledger::rooms_for`], [`Ledger::charge_task`], [`Ledger::pack_gang`]) never offer a
//! node outside the task's set, so a policy built on them honours taints, node
//! selectors and affinity without knowing they exist.
//!
//! By subject: `resources` (arithmetic on the WIT's resource record), `jobs` (what a
//! job's tasks ask for and where they are), `gang` (the shapes of gangs of identical
//! tasks, and those remembered as not fitting), `nodes` (a node's names, capacity and
//! eligibility as a ledger holds them), `ledger` ([`Ledger`] itself). The modules are
//! private; every public name is re-exported here, so `cluster::Ledger` and the rest
//! keep their paths.

mod gang;
mod jobs;
mod ledger;
mod nodes;
mod resources;

pub use gang::GangShape;
pub use jobs::{
    ONE_TASK_PER_NODE_LABEL, has_pending_tasks, nodes_of, one_task_per_node, pending_tasks,
    total_requests,
};
pub use ledger::Ledger;
pub use nodes::{Headroom, NodeOrder, Room};
pub use resources::ResourcesExt;
