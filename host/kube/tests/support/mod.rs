//! What the Kubernetes scenarios share: the scripted API server ([`mock`]), builders for
//! TrainingJobs, pods, nodes and the requests the controller is expected to make
//! ([`fixtures`]), hand-filled reflector caches standing for a cluster ([`world`]), and
//! a kube-scheduler that binds the released pods of such a cluster ([`scheduler`]).
//! The `switchyard` crate's kube-mode tests include this module too.

#![allow(dead_code, unreachable_pub)]

pub mod fixtures;
pub mod mock;
pub mod owners;
pub mod scheduler;
pub mod world;
