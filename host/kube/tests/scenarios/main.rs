//! The Kubernetes backend against a scripted API server (the kube-rs `tower_test`
//! pattern): each scenario drives the real backend code, checks every request it makes,
//! and returns what it accessed, so [`rbac`] can check `deploy/rbac.yaml` against the
//! union of them.

#[path = "../support/mod.rs"]
mod support;

mod adopted_lifecycle;
mod adopted_scaling;
mod adoption;
mod checkpoints;
mod cluster;
mod events;
mod failures;
mod fencing;
mod gangs;
mod lease;
mod logs;
mod moves;
mod others;
mod outcomes;
mod ownership;
mod rbac;
mod releases;
mod rendezvous;
mod restarts;
mod snapshot;
mod spread;
mod startup;
mod state;
mod views;
mod volumes;
mod wedges;
mod writes;
