//! Leader election over a `coordination.k8s.io/v1` Lease, so that of the controller's
//! replicas exactly one acts. Every write carries the resourceVersion that was read, so
//! two replicas racing for the same Lease cannot both win: the loser gets a 409 and
//! stays (or becomes) a follower. [`keep_leading`] runs the election for a [`Leader`]
//! grant: each renewal grants the lead until a little before the Lease could expire
//! for the other replicas, counted from before the call, so a renewal that hangs never
//! keeps a replica acting past that point; a replica that loses the lead is told so,
//! and exits. Another replica's Lease expires when it has not changed for its duration
//! by this replica's own clock (never by comparing the holder's `renewTime` with the
//! local clock, which clock skew would defeat). It owns the Lease; it must not act on
//! the cluster.
//!
//! Each acquisition raises the Lease's `leaseTransitions`; the value a replica acquired
//! under is its term ([`LeaderTerm`]), a fencing token: the controller writes it into
//! every status it writes (guarded by the status's resourceVersion), and a replica whose
//! term is older than the one a status carries writes nothing more to that job, even
//! when a pause kept it from noticing that its lead ran out.
//!
//! A replica whose container restarted comes back under the same identity (its pod
//! name) and renews the Lease it finds in its own name at once, as client-go does: the
//! process that held it is gone with the old container. What makes that safe is that
//! the election only starts once the replica's caches have listed (see the in-cluster
//! wiring), so the new process never acts on an empty cache.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, ObjectMeta, PostParams};

use crate::retry::LeaderTerm;
use crate::{Error, FIELD_MANAGER, Result};
use switchyard_control::Leader;

/// What one election round found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Leadership {
    /// This replica holds the Lease (newly acquired or renewed).
    Leading,
    /// Another replica holds a Lease that has not expired.
    Following {
        /// The holder's identity.
        holder: String,
    },
    /// The write lost a race (409): someone else changed the Lease first.
    LostRace,
}

/// One replica's handle on the election.
#[derive(Clone)]
pub struct LeaseLock {
    api: Api<Lease>,
    name: String,
    identity: String,
    duration: Duration,
    /// The other holder's record as last seen, and when this replica saw it change.
    observed: Arc<Mutex<Option<Observed>>>,
    /// The term of the Lease as this replica last wrote it.
    term: LeaderTerm,
}

/// A Lease record held by another replica and when this one saw it last change: a
/// Lease has expired when it has not changed for its duration by this replica's own
/// clock, as client-go judges it. The holder's `renewTime` is never compared with the
/// local clock, so clock skew between nodes cannot make two leaders.
#[derive(Clone, Debug)]
struct Observed {
    /// Holder, renew time and resourceVersion: any change is a renewal.
    record: (String, Option<String>, Option<String>),
    at: tokio::time::Instant,
}

impl LeaseLock {
    /// An election over Lease `name` in `api`'s namespace, as `identity` (the pod name),
    /// holding it for `duration` after each renewal.
    pub fn new(api: Api<Lease>, name: &str, identity: &str, duration: Duration) -> Self {
        Self {
            api,
            name: name.into(),
            identity: identity.into(),
            duration,
            observed: Arc::default(),
            term: LeaderTerm::default(),
        }
    }

    /// The term this replica leads under, kept up to date by every acquisition and
    /// renewal (see [`LeaderTerm`]).
    pub fn term(&self) -> LeaderTerm {
        self.term.clone()
    }

    /// How often to call [`LeaseLock::try_acquire_or_renew`]: a third of the duration,
    /// so two missed renewals still keep the Lease.
    pub fn renew_every(&self) -> Duration {
        self.duration / 3
    }

    /// How long a renewal lets this replica act, counted from before the call: four
    /// fifths of the Lease duration, leaving the rest for clock skew between nodes.
    pub fn valid_for(&self) -> Duration {
        self.duration * 4 / 5
    }

    /// Acquires the Lease if it is free or expired, renews it if held, and otherwise
    /// reports who holds it. `now` is the current time.
    pub async fn try_acquire_or_renew(&self, now: Timestamp) -> Result<Leadership> {
        let name = self.name.clone();
        let current = self
            .api
            .get_opt(&name)
            .await
            .map_err(Error::api(format!("reading Lease {name}")))?;
        let seconds = i32::try_from(self.duration.as_secs()).unwrap_or(i32::MAX);
        let Some(mut lease) = current else {
            let lease = Lease {
                metadata: ObjectMeta {
                    name: Some(name.clone()),
                    ..ObjectMeta::default()
                },
                spec: Some(LeaseSpec {
                    holder_identity: Some(self.identity.clone()),
                    lease_duration_seconds: Some(seconds),
                    acquire_time: Some(MicroTime(now)),
                    renew_time: Some(MicroTime(now)),
                    lease_transitions: Some(0),
                    ..LeaseSpec::default()
                }),
            };
            return self.write(
                self.api.create(&self.post_params(), &lease).await,
                "creating",
            );
        };
        let version = lease.metadata.resource_version.clone();
        let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
        let holder = spec.holder_identity.clone().filter(|h| !h.is_empty());
        if holder.as_deref() != Some(self.identity.as_str()) {
            if let Some(holder) = holder {
                let held_for = Duration::from_secs(
                    spec.lease_duration_seconds
                        .unwrap_or(seconds)
                        .max(0)
                        .unsigned_abs()
                        .into(),
                );
                let record = (
                    holder.clone(),
                    spec.renew_time.as_ref().map(|t| t.0.to_string()),
                    version,
                );
                let local_now = tokio::time::Instant::now();
                let mut observed = self.observed.lock().expect("observed lock");
                let unchanged_since = match observed.as_ref() {
                    Some(seen) if seen.record == record => seen.at,
                    _ => {
                        *observed = Some(Observed {
                            record,
                            at: local_now,
                        });
                        local_now
                    }
                };
                if local_now < unchanged_since + held_for {
                    return Ok(Leadership::Following { holder });
                }
            }
            spec.holder_identity = Some(self.identity.clone());
            spec.acquire_time = Some(MicroTime(now));
            spec.lease_transitions = Some(spec.lease_transitions.unwrap_or(0) + 1);
        }
        spec.lease_duration_seconds = Some(seconds);
        spec.renew_time = Some(MicroTime(now));
        let written = self.api.replace(&name, &self.post_params(), &lease).await;
        self.write(written, "updating")
    }

    /// Gives the Lease up (on shutdown) so another replica takes over at once instead
    /// of after the Lease expires. Does nothing when this replica does not hold it.
    pub async fn release(&self) -> Result<()> {
        let name = self.name.clone();
        let Some(mut lease) = self
            .api
            .get_opt(&name)
            .await
            .map_err(Error::api(format!("reading Lease {name}")))?
        else {
            return Ok(());
        };
        let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
        if spec.holder_identity.as_deref() != Some(self.identity.as_str()) {
            return Ok(());
        }
        // As client-go does: an empty holder and a one-second duration free it at once.
        spec.holder_identity = Some(String::new());
        spec.lease_duration_seconds = Some(1);
        self.write(
            self.api.replace(&name, &self.post_params(), &lease).await,
            "releasing",
        )
        .map(|_| ())
    }

    fn post_params(&self) -> PostParams {
        PostParams {
            field_manager: Some(FIELD_MANAGER.into()),
            ..PostParams::default()
        }
    }

    fn write(&self, outcome: Result<Lease, kube::Error>, what: &str) -> Result<Leadership> {
        match outcome {
            Ok(written) => {
                let transitions = written.spec.and_then(|s| s.lease_transitions);
                self.term
                    .set(transitions.unwrap_or(0).max(0).unsigned_abs().into());
                Ok(Leadership::Leading)
            }
            Err(kube::Error::Api(s)) if s.code == 409 => Ok(Leadership::LostRace),
            Err(error) => Err(Error::api(format!("{what} Lease {}", self.name))(error)),
        }
    }
}

/// Runs the election for `leader`: every [`LeaseLock::renew_every`], acquires or renews
/// the Lease. A renewal grants the lead for [`LeaseLock::valid_for`] from when it
/// started; a call that fails or hangs (it is abandoned after `renew_every`) grants
/// nothing, so the grant runs out on its own. Returns once this replica has led and no
/// longer does: what it remembers of the cluster (deletes sent, pods assumed, a restart
/// half-way) may be out of date, so the process should exit and start again as a
/// follower, as kube-controller-manager does.
pub async fn keep_leading(lock: LeaseLock, leader: Arc<Leader>) -> LeadershipLost {
    let mut led = false;
    loop {
        let started = tokio::time::Instant::now();
        let was_leading = leader.is_leading();
        let attempt = tokio::time::timeout(
            lock.renew_every(),
            lock.try_acquire_or_renew(Timestamp::now()),
        )
        .await;
        match attempt {
            Ok(Ok(Leadership::Leading)) => leader.lead_until(started + lock.valid_for()),
            Ok(Ok(Leadership::Following { holder })) => leader.follow(Some(holder)),
            Ok(Ok(Leadership::LostRace)) => leader.follow(None),
            Ok(Err(error)) => tracing::warn!(%error, "leader election"),
            Err(_) => tracing::warn!(
                timeout = ?lock.renew_every(),
                "the Lease call did not answer; the lead runs out unless a renewal succeeds"
            ),
        }
        let leading = leader.is_leading();
        if leading != was_leading {
            tracing::info!(leading, leader = ?leader.holder(), "leadership changed");
        }
        led |= leading;
        if led && !leading {
            leader.follow(leader.holder());
            return LeadershipLost;
        }
        tokio::time::sleep_until(started + lock.renew_every()).await;
    }
}

/// [`keep_leading`] ended: this replica led and lost the lead.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LeadershipLost;
