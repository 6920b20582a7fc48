//! A policy that logs as much as the host's per-call cap allows in every call
//! (`lines` lines of `bytes` bytes each: by default 1,000 lines of 262 bytes, just
//! under the default cap of 1,000 lines and 256 KiB) and asks to be called again every
//! `every` seconds, so only the host's log budget over time bounds what reaches the
//! log. It places waiting jobs pod by pod, so a workload runs to its end.

pub mod policy {
    //! Logs its fill, places what waits.

    use switchyard_policy_sdk::bindings::switchyard::policy::host::LogLevel;
    use switchyard_policy_sdk::cluster::Ledger;
    use switchyard_policy_sdk::log::log;
    use switchyard_policy_sdk::placement::{Scoring, pod_by_pod};
    use switchyard_policy_sdk::settings::{ParamSpec, Settings, parameters};
    use switchyard_policy_sdk::{Decision, Description, Setting, Snapshot};

    const SPEC: &[ParamSpec] = &[
        ParamSpec {
            name: "lines",
            default: "1000",
            doc: "log lines per call",
        },
        ParamSpec {
            name: "bytes",
            default: "262",
            doc: "bytes per log line",
        },
        ParamSpec {
            name: "every",
            default: "1",
            doc: "seconds until the next call",
        },
    ];

    /// Its name and parameters.
    pub fn describe() -> Description {
        Description {
            name: "log-flood".into(),
            version: "0.0.0".into(),
            summary: "logs all its per-call cap allows, every second".into(),
            parameters: parameters(SPEC),
            reads_loss: false,
        }
    }

    /// Checks that every parameter is a number.
    pub fn configure(settings: &[Setting]) -> Result<Vec<Setting>, String> {
        let resolved = Settings::resolve(SPEC, settings)?;
        for spec in SPEC {
            resolved.f64(spec.name)?;
        }
        Ok(resolved.to_settings())
    }

    /// Logs `lines` lines of `bytes` bytes, places every waiting pod that fits.
    pub fn decide(
        settings: &[Setting],
        snapshot: &Snapshot,
        state: &[u8],
    ) -> Result<Decision, String> {
        let resolved = Settings::resolve(SPEC, settings)?;
        let lines = resolved.f64("lines")? as usize;
        let bytes = resolved.f64("bytes")? as usize;
        let line = format!("{:x<bytes$}", format!("t={} ", snapshot.time));
        for _ in 0..lines {
            log(LogLevel::Warn, &line);
        }
        let mut ledger = Ledger::new(snapshot);
        Ok(Decision {
            actions: pod_by_pod(snapshot, &mut ledger, Scoring::LeastAllocated),
            labels: vec![],
            next_call_after: Some(resolved.f64("every")?),
            state: state.to_vec(),
        })
    }
}

switchyard_policy_sdk::policy_binding!(LogFlood, policy);
