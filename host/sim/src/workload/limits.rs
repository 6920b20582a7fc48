//! How much a workload file and the traces it imports may declare ([`InputLimits`]),
//! and the checks of single values every reader of them shares: a name's length, a
//! number that must be finite and positive. A workload's declared size (its node groups'
//! counts, its entries' counts times their tasks, a trace's rows) is held to these
//! before anything is built, so a file of a few lines asking for a billion jobs is
//! refused at once in bounded memory. It reads no file.

/// The most CPU cores a node or a task may have.
pub(super) const MAX_CORES: f64 = 1e6;
/// The most memory a node or a task may have, GiB.
pub(super) const MAX_MEMORY_GIB: f64 = 1e9;

/// The bounds on what a workload may declare. `InputLimits::default()` is what
/// `simulate`, `sweep`, `run` and `replay --simulate` read workloads with; `docs/security.md`
/// lists each with its default. A sweep's plan carries them (a field left out is its
/// default), so every cell reads its workload within the limits the sweep was given.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub struct InputLimits {
    /// Jobs in one scenario: every entry's `count` and every imported trace row taken.
    pub jobs: u64,
    /// Nodes in one cluster: every node group's `count`.
    pub nodes: u64,
    /// Tasks of all jobs together at submission (jobs times their tasks).
    pub tasks: u64,
    /// Tasks of one job at submission (the sum of its roles' counts; a Philly job's
    /// gang of workers).
    pub tasks_per_job: u64,
    /// The most replicas a job's scalable role may have (`scale.max`, a Pollux row's
    /// `num_replicas`, the entries of a `throughput` table).
    pub replicas: u64,
    /// Bytes of a name: a node, job id, template, role, a label's key or value.
    pub name_bytes: usize,
    /// Labels of one node group or template.
    pub labels: usize,
    /// Nesting of a YAML file's collections (mappings and sequences within each other).
    pub yaml_depth: usize,
    /// Bytes of a YAML file.
    pub yaml_bytes: u64,
    /// Rows of one imported trace or measurement file (Philly, Pollux).
    pub trace_rows: u64,
    /// Bytes of one imported trace or measurement file.
    pub trace_bytes: u64,
}

impl Default for InputLimits {
    fn default() -> Self {
        Self {
            // The largest shipped workloads have 50,000 jobs (100,000 tasks) on 10,000
            // nodes, and the whole Philly trace 82,249 jobs: each default leaves room
            // for many times that, and refuses what no machine would simulate.
            jobs: 1_000_000,
            nodes: 100_000,
            tasks: 4_000_000,
            tasks_per_job: 10_000,
            replicas: 10_000,
            // A Kubernetes object name (DNS subdomain) is at most 253 bytes.
            name_bytes: 253,
            labels: 64,
            // The deepest shipped file nests 6 levels.
            yaml_depth: 64,
            yaml_bytes: 64 << 20,
            trace_rows: 1_000_000,
            trace_bytes: 256 << 20,
        }
    }
}

impl InputLimits {
    /// Why `name` cannot be a name: empty, longer than [`InputLimits::name_bytes`], or
    /// holding a control character (a line break in a name would forge lines wherever
    /// it is printed or written).
    pub(crate) fn check_name(&self, name: &str) -> Result<(), String> {
        if name.is_empty() {
            return Err(format!(
                "an empty name; give 1 to {} bytes",
                self.name_bytes
            ));
        }
        if name.len() > self.name_bytes {
            return Err(format!(
                "a name of {} bytes (`{}...`); give 1 to {} bytes",
                name.len(),
                name.chars().take(20).collect::<String>().escape_debug(),
                self.name_bytes
            ));
        }
        if name.chars().any(char::is_control) {
            return Err(format!(
                "`{}` holds a control character; give a name of printable characters",
                name.escape_debug()
            ));
        }
        Ok(())
    }

    /// Why `labels` are too many or too long: the field of the one at fault (below
    /// `field`) and what is wrong.
    pub(crate) fn check_labels<'a>(
        &self,
        field: &str,
        labels: impl ExactSizeIterator<Item = (&'a String, &'a String)>,
    ) -> Result<(), (String, String)> {
        if labels.len() > self.labels {
            return Err((
                field.to_string(),
                format!("{} labels; give at most {}", labels.len(), self.labels),
            ));
        }
        for (key, value) in labels {
            self.check_name(key)
                .map_err(|m| (format!("{field} (a key)"), m))?;
            if value.len() > self.name_bytes {
                return Err((
                    format!("{field}.{key}"),
                    format!(
                        "a value of {} bytes; give at most {}",
                        value.len(),
                        self.name_bytes
                    ),
                ));
            }
        }
        Ok(())
    }
}

/// A number as a message quotes it: plainly when it is of a size people write
/// (`-8`, `0.5`, `1000000`), in exponent form past that (`1e308`, `NaN`, `inf`), so a
/// refusal of a huge value stays one short line.
pub(crate) struct Number(pub(crate) f64);

impl std::fmt::Display for Number {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.0.is_finite() && self.0.abs() < 1e16 {
            write!(f, "{}", self.0)
        } else {
            write!(f, "{:?}", self.0)
        }
    }
}

/// `value` when it is a finite number above 0, else what is wrong and what is accepted
/// (`unit` names what it counts).
pub(crate) fn positive(value: f64, unit: &str) -> Result<f64, String> {
    if value.is_finite() && value > 0.0 {
        Ok(value)
    } else {
        Err(format!(
            "got {}; give a finite number of {unit} above 0",
            Number(value)
        ))
    }
}

/// `value` when it is a finite number above 0 and at most `max`, else what is wrong and
/// what is accepted.
pub(crate) fn positive_up_to(value: f64, max: f64, unit: &str) -> Result<f64, String> {
    if value.is_finite() && value > 0.0 && value <= max {
        Ok(value)
    } else {
        Err(format!(
            "got {}; give a finite number of {unit} above 0 and at most {}",
            Number(value),
            Number(max)
        ))
    }
}

/// `value` when it is a finite number of at least 0, else what is wrong and what is
/// accepted.
pub(crate) fn non_negative(value: f64, unit: &str) -> Result<f64, String> {
    if value.is_finite() && value >= 0.0 {
        Ok(value)
    } else {
        Err(format!(
            "got {}; give a finite number of {unit} from 0",
            Number(value)
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_name_and_a_megabyte_name_are_refused_saying_what_is_accepted() {
        let limits = InputLimits::default();
        assert!(limits.check_name("cpu-0").is_ok());
        let empty = limits.check_name("").unwrap_err();
        assert!(
            empty.contains("empty") && empty.contains("1 to 253 bytes"),
            "{empty}"
        );
        let long = limits.check_name(&"n".repeat(1 << 20)).unwrap_err();
        assert!(
            long.contains("1048576 bytes") && long.contains("1 to 253"),
            "{long}"
        );
        assert!(
            long.len() < 200,
            "the message quotes the name's start only: {long}"
        );
        let forged = limits.check_name("a\nimport: x").unwrap_err();
        assert!(
            forged.contains("`a\\nimport: x`") && forged.contains("control"),
            "{forged}"
        );
    }

    #[test]
    fn too_many_labels_an_empty_key_and_a_long_value_are_refused_naming_the_field() {
        let limits = InputLimits::default();
        let labels = |pairs: &[(String, String)]| -> std::collections::BTreeMap<_, _> {
            pairs.iter().cloned().collect()
        };
        let many = labels(
            &(0..65)
                .map(|k| (format!("k{k}"), "v".to_string()))
                .collect::<Vec<_>>(),
        );
        let (field, message) = limits.check_labels("labels", many.iter()).unwrap_err();
        assert_eq!(field, "labels");
        assert!(
            message.contains("65 labels") && message.contains("at most 64"),
            "{message}"
        );
        let empty = labels(&[(String::new(), "v".into())]);
        let (field, message) = limits.check_labels("labels", empty.iter()).unwrap_err();
        assert_eq!(field, "labels (a key)");
        assert!(message.contains("empty name"), "{message}");
        let long = labels(&[("team".into(), "v".repeat(254))]);
        let (field, message) = limits.check_labels("labels", long.iter()).unwrap_err();
        assert_eq!(field, "labels.team");
        assert!(
            message.contains("254 bytes") && message.contains("at most 253"),
            "{message}"
        );
        let within = labels(&[("team".into(), "v".repeat(253))]);
        assert!(limits.check_labels("labels", within.iter()).is_ok());
    }

    #[test]
    fn a_number_that_must_be_positive_refuses_nan_zero_negative_and_infinite() {
        for bad in [f64::NAN, 0.0, -8.0, f64::INFINITY] {
            let error = positive(bad, "cores").unwrap_err();
            assert!(
                error.contains(&format!("got {}", Number(bad))) && error.contains("above 0"),
                "{error}"
            );
        }
        let huge = positive_up_to(1e308, 1e6, "cores").unwrap_err();
        assert!(
            huge.contains("got 1e308") && huge.contains("at most 1000000"),
            "{huge}"
        );
        assert_eq!(positive(0.5, "cores"), Ok(0.5));
        assert_eq!(non_negative(0.0, "seconds"), Ok(0.0));
        assert!(non_negative(-0.1, "seconds").is_err());
    }
}
