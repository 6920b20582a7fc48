//! Whether this replica may act: a grant with a local expiry. The cluster backend's
//! election extends the grant after every successful Lease renewal; the decision thread,
//! the cluster and the API only read it. Because the grant runs out on its own, a replica
//! whose renew call hangs stops acting before its Lease can pass to another replica,
//! without waiting for the call to fail. This module knows nothing about Leases or the
//! API server.

use std::sync::Mutex;

use tokio::time::Instant;

/// This replica's part in the election.
#[derive(Debug)]
pub struct Leader {
    identity: String,
    state: Mutex<State>,
}

#[derive(Debug)]
struct State {
    /// `None`: never expires (a controller that is alone, such as the simulator's).
    grant: Option<Option<Instant>>,
    /// Who holds the lead, as last seen.
    holder: Option<String>,
}

impl Leader {
    /// A controller that is alone and always acts (the simulator).
    pub fn always(identity: &str) -> Self {
        Self {
            identity: identity.to_string(),
            state: Mutex::new(State {
                grant: None,
                holder: Some(identity.to_string()),
            }),
        }
    }

    /// A replica that acts only while an election grants it; it starts as a follower.
    pub fn elected(identity: &str) -> Self {
        Self {
            identity: identity.to_string(),
            state: Mutex::new(State {
                grant: Some(None),
                holder: None,
            }),
        }
    }

    /// This replica's identity (the pod name in a cluster).
    pub fn identity(&self) -> &str {
        &self.identity
    }

    /// Whether this replica may act now.
    pub fn is_leading(&self) -> bool {
        match self.state.lock().expect("leader lock").grant {
            None => true,
            Some(until) => until.is_some_and(|t| Instant::now() < t),
        }
    }

    /// The replica that leads, as far as this one knows (itself while it leads).
    pub fn holder(&self) -> Option<String> {
        if self.is_leading() {
            return Some(self.identity.clone());
        }
        let state = self.state.lock().expect("leader lock");
        state.holder.clone().filter(|h| *h != self.identity)
    }

    /// Grants the lead until `deadline` (the election renewed the Lease).
    pub fn lead_until(&self, deadline: Instant) {
        let mut state = self.state.lock().expect("leader lock");
        if let Some(until) = &mut state.grant {
            *until = Some(deadline);
            state.holder = Some(self.identity.clone());
        }
    }

    /// Withdraws the lead at once: `holder` (if known) leads instead, or shutdown.
    pub fn follow(&self, holder: Option<String>) {
        let mut state = self.state.lock().expect("leader lock");
        if let Some(until) = &mut state.grant {
            *until = None;
            state.holder = holder;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_grant_runs_out_on_its_own_without_a_renewal() {
        let leader = Leader::elected("a");
        assert!(!leader.is_leading(), "a replica starts as a follower");
        leader.lead_until(Instant::now() + Duration::from_secs(10));
        assert!(leader.is_leading());
        assert_eq!(leader.holder().as_deref(), Some("a"));
        tokio::time::advance(Duration::from_secs(11)).await;
        assert!(!leader.is_leading(), "the grant expired locally");
        leader.lead_until(Instant::now() + Duration::from_secs(10));
        leader.follow(Some("b".into()));
        assert!(!leader.is_leading());
        assert_eq!(leader.holder().as_deref(), Some("b"));
    }

    #[test]
    fn a_controller_alone_always_leads() {
        let leader = Leader::always("sim");
        leader.follow(None);
        assert!(leader.is_leading());
    }
}
