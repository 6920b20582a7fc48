//! An incremental policy's instance kept between calls, and the log budget over time of
//! each caller's policy (kept in `log_budget.rs`'s account).
//!
//! Moving a 10,000-task snapshot into a guest costs more than most policies' own work,
//! while a round changes a few jobs. A [`Session`] keeps one instance of an
//! `incremental-policy` component and the host's copy of the snapshot it holds, and
//! hands each call only the difference. The host stays the owner of the truth: the
//! first call, any failure, a session moved to another component, or a guest that
//! printed too much starts a fresh instance with the whole snapshot. That first call runs
//! under the longer priming deadline ([`crate::SandboxLimits::priming_deadline`]): its
//! cost grows with the cluster, not with the round.
//!
//! What a policy is sent follows the description it gave when it was loaded: a policy
//! that does not read loss series holds jobs without them ([`HeldSnapshot::for_policy`]).
//! A session moved to another component starts that one afresh with its own.

use std::sync::{Arc, Mutex};

use wasmtime::Store;

use crate::call::{CallError, Exports, Flavor};
use crate::contract;
use crate::error::PolicyError;
use crate::log_budget::PolicyLog;
use crate::module::{Compiled, PolicyModule};
use crate::sandbox::GuestState;
use switchyard_core::{Change, Decision, HeldSnapshot, Settings, Snapshot};

/// Where one caller (the active policy, the fallback, an experiment's arm) keeps its
/// policy's instance between calls, and the policy's log budget over time. Clones share
/// both; the instance goes when the last clone does. Calls through one session run one
/// at a time.
#[derive(Clone, Default)]
pub struct Session {
    kept: Arc<Mutex<Option<KeptInstance>>>,
    log: PolicyLog,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kept = self.kept.lock().map(|k| k.is_some()).unwrap_or(false);
        f.debug_struct("Session").field("kept", &kept).finish()
    }
}

/// A live instance and the snapshot it holds.
struct KeptInstance {
    /// The code it was instantiated from: another module's, or the same module's before
    /// Cranelift's code replaced Winch's, means a fresh instance.
    compiled: Arc<Compiled>,
    store: Store<GuestState>,
    policy: Exports,
    /// What the instance holds; `None` until a call succeeded.
    held: Option<HeldSnapshot>,
}

impl PolicyModule {
    /// One decision round, on the instance kept in `session` when the component takes
    /// deltas (a `policy` component gets a fresh instance, as with
    /// [`PolicyModule::decide`]). The decision is the one `decide` would give.
    pub fn decide_in(
        &self,
        session: &Session,
        settings: &Settings,
        snapshot: &Snapshot,
        state: &[u8],
        seed: u64,
    ) -> Result<Decision, PolicyError> {
        let compiled = self.compiled();
        if compiled.pre.flavor != Flavor::Incremental {
            return self.decide_logged(settings, snapshot, state, seed, Some(&session.log));
        }
        let mut slot = session
            .kept
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let mut kept = match slot.take() {
            Some(kept) if Arc::ptr_eq(&kept.compiled, &compiled) => kept,
            _ => {
                let mut store = self.new_store(&compiled, snapshot.time, seed);
                self.arm_priming_deadline(&mut store);
                let policy = compiled
                    .pre
                    .instantiate(&mut store)
                    .map_err(|error| self.classify(error, store.data()))?;
                KeptInstance {
                    compiled: compiled.clone(),
                    store,
                    policy,
                    held: None,
                }
            }
        };
        kept.store.data_mut().begin_call(snapshot.time, seed);
        kept.store
            .data_mut()
            .log_over_time(&session.log, self.limits().log_rate);
        let change = match &kept.held {
            Some(held) => {
                self.arm_deadline(&mut kept.store);
                held.change_to(snapshot)
            }
            None => {
                self.arm_priming_deadline(&mut kept.store);
                Change::Reset
            }
        };
        let reads_loss = self.description().reads_loss;
        let answer = kept.policy.decide_change(
            &mut kept.store,
            &contract::settings_to_wit(settings),
            &contract::delta_for(snapshot, &change, reads_loss),
            state,
            self.limits(),
        );
        kept.store.data_mut().end_call();
        let answer = answer.map_err(|error: CallError| self.failed(error, kept.store.data()))?;
        if answer.is_ok() {
            // A refusal may come before or after the guest applied the change; only a
            // decision says for sure what the instance holds.
            kept.held
                .get_or_insert_with(|| HeldSnapshot::for_policy(reads_loss))
                .commit(snapshot, &change);
            let data = kept.store.data();
            if !data.output_nearly_full() && !data.memory_nearly_full() {
                *slot = Some(kept);
            }
        }
        self.checked(answer)
    }
}
