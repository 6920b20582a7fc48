//! `default`: the baseline that behaves like the stock kube-scheduler.
//!
//! Pod by pod, in job submission order: filter the nodes the pod fits on, score them
//! with `LeastAllocated` (the most free capacity left wins, ties to the first node), and
//! bind the pod on its own. No gang, no migration, no weights, no scaling. Because pods
//! are placed one at a time, two distributed jobs can each get part of their roles and
//! deadlock, exactly as the gang-scheduling thesis (section 4.5) describes; that is the
//! point of the baseline.

/// The policy as plain functions; [`DefaultPolicy`] is its Wasm binding.
pub mod policy {
    use switchyard_policy_sdk::{
        Decision, Description, Setting, Snapshot,
        cluster::Ledger,
        placement::{Scoring, pod_by_pod},
        settings::{ParamSpec, Settings, parameters},
    };

    const SPEC: &[ParamSpec] = &[ParamSpec {
        name: "scoring",
        default: "least-allocated",
        doc: "node score, as kube-scheduler's NodeResourcesFit: least-allocated (spread) or most-allocated (bin-pack)",
    }];

    fn scoring(settings: &Settings) -> Result<Scoring, String> {
        Ok(
            match settings.choice("scoring", &["least-allocated", "most-allocated"])? {
                "most-allocated" => Scoring::MostAllocated,
                _ => Scoring::LeastAllocated,
            },
        )
    }

    /// Name, version, summary and the one parameter.
    pub fn describe() -> Description {
        Description {
            name: "default".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            summary: "kube-scheduler-like baseline: pod by pod, least-allocated, no gang".into(),
            parameters: parameters(SPEC),
            reads_loss: false, // pods are placed by resources alone
        }
    }

    /// Checks `scoring`.
    pub fn configure(settings: &[Setting]) -> Result<Vec<Setting>, String> {
        let resolved = Settings::resolve(SPEC, settings)?;
        scoring(&resolved)?;
        Ok(resolved.to_settings())
    }

    /// Places every pending pod that fits, pod by pod; the state passes through.
    pub fn decide(
        settings: &[Setting],
        snapshot: &Snapshot,
        state: &[u8],
    ) -> Result<Decision, String> {
        let scoring = scoring(&Settings::resolve(SPEC, settings)?)?;
        let mut ledger = Ledger::new(snapshot);
        Ok(Decision {
            actions: pod_by_pod(snapshot, &mut ledger, scoring),
            labels: vec![],
            next_call_after: None,
            state: state.to_vec(),
        })
    }
}

switchyard_policy_sdk::policy_binding!(DefaultPolicy, policy);
