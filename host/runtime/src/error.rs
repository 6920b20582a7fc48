//! Typed errors of loading and calling policy components.

use std::time::Duration;

/// A component was refused at load time.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The bytes are not a WebAssembly component (a core module, or not Wasm at all).
    #[error("{source_name} is not a WebAssembly component: {reason}")]
    NotAComponent {
        /// Where the bytes came from.
        source_name: String,
        /// What the parser said.
        reason: String,
    },
    /// The component does not implement the policy world at the host's version.
    #[error(
        "{source_name} does not implement the switchyard policy world: {reason} \
         (a policy must export {expected} and import only `switchyard:policy/host` and WASI)"
    )]
    WrongWorld {
        /// Where the bytes came from.
        source_name: String,
        /// What is missing or different.
        reason: String,
        /// The exports the host looks for.
        expected: &'static str,
    },
    /// `describe` failed when the host asked the policy who it is.
    #[error("{source_name}: calling `describe` failed: {source}")]
    Describe {
        /// Where the bytes came from.
        source_name: String,
        /// The call failure.
        #[source]
        source: PolicyError,
    },
    /// The name the policy gives itself cannot name a policy.
    #[error("{source_name}: {message}; a policy's `describe` must give a DNS-label name")]
    BadName {
        /// Where the bytes came from.
        source_name: String,
        /// What is wrong with the name.
        message: String,
    },
    /// The engine could not be set up (bad cache configuration).
    #[error("cannot set up the WebAssembly engine: {0}")]
    Engine(String),
}

impl LoadError {
    /// A short label for metrics (`not-a-component`, `wrong-world`, `describe`,
    /// `bad-name`, `engine`).
    pub fn metric_label(&self) -> &'static str {
        match self {
            LoadError::NotAComponent { .. } => "not-a-component",
            LoadError::WrongWorld { .. } => "wrong-world",
            LoadError::Describe { .. } => "describe",
            LoadError::BadName { .. } => "bad-name",
            LoadError::Engine(_) => "engine",
        }
    }
}

/// A call into a loaded policy failed; the policy's name and digest say which one.
#[derive(Debug, thiserror::Error)]
pub enum PolicyError {
    /// The policy ran past its epoch deadline and was stopped.
    #[error("policy {policy} ({digest}) ran past its {deadline} and was stopped")]
    DeadlineExceeded {
        /// Policy name.
        policy: String,
        /// Short digest.
        digest: String,
        /// The deadline it overran.
        deadline: CallDeadline,
    },
    /// The policy tried to grow its memory past the cap.
    #[error(
        "policy {policy} ({digest}) tried to use more than {limit_bytes} bytes of memory and was stopped"
    )]
    OutOfMemory {
        /// Policy name.
        policy: String,
        /// Short digest.
        digest: String,
        /// The cap.
        limit_bytes: usize,
    },
    /// The policy trapped (panic, unreachable, bad memory access).
    #[error("policy {policy} ({digest}) trapped: {message}")]
    Trap {
        /// Policy name.
        policy: String,
        /// Short digest.
        digest: String,
        /// The trap and anything the guest printed.
        message: String,
    },
    /// The policy returned an error of its own (bad settings, state it cannot read).
    #[error("policy {policy} ({digest}) refused: {message}")]
    Refused {
        /// Policy name.
        policy: String,
        /// Short digest.
        digest: String,
        /// The policy's message.
        message: String,
    },
    /// The policy returned something the host cannot use.
    #[error("policy {policy} ({digest}) returned an invalid result: {message}")]
    InvalidResult {
        /// Policy name.
        policy: String,
        /// Short digest.
        digest: String,
        /// What is wrong with it.
        message: String,
    },
}

impl PolicyError {
    /// A short label for metrics (`deadline`, `oom`, `trap`, `refused`, `invalid`).
    pub fn metric_label(&self) -> &'static str {
        match self {
            PolicyError::DeadlineExceeded { .. } => "deadline",
            PolicyError::OutOfMemory { .. } => "oom",
            PolicyError::Trap { .. } => "trap",
            PolicyError::Refused { .. } => "refused",
            PolicyError::InvalidResult { .. } => "invalid",
        }
    }
}

/// The deadline a call ran under.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CallDeadline {
    /// A round's deadline ([`crate::SandboxLimits::deadline`]).
    Round(Duration),
    /// The first call of a kept instance, which takes the whole cluster
    /// ([`crate::SandboxLimits::priming_deadline`]).
    Priming(Duration),
}

impl CallDeadline {
    /// How long the call could run.
    pub fn duration(self) -> Duration {
        match self {
            CallDeadline::Round(d) | CallDeadline::Priming(d) => d,
        }
    }
}

impl std::fmt::Display for CallDeadline {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CallDeadline::Round(d) => write!(f, "{d:?} deadline"),
            CallDeadline::Priming(d) => write!(
                f,
                "{d:?} deadline for a fresh instance's first call (the whole cluster)"
            ),
        }
    }
}
