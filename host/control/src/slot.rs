//! A policy ready to decide ([`PolicySlot`]): the loaded module, its effective
//! settings and where its instance is kept between rounds. It runs no round; the loop
//! and the experiments hold slots.

use std::sync::Arc;

use switchyard_core::Settings;
use switchyard_runtime::{PolicyError, PolicyModule, Session};

/// A policy ready to decide: the module, its effective settings, and where its
/// instance is kept between rounds (clones of a slot share it).
#[derive(Clone, Debug)]
pub struct PolicySlot {
    /// The loaded component.
    pub module: Arc<PolicyModule>,
    /// Effective settings (as returned by `configure`).
    pub settings: Settings,
    /// The instance an incremental policy keeps between rounds.
    pub session: Session,
}

impl PolicySlot {
    /// Configures `module` with `settings` (defaults filled in by the policy).
    pub fn configure(module: Arc<PolicyModule>, settings: &Settings) -> Result<Self, PolicyError> {
        let settings = module.configure(settings)?;
        Ok(Self::new(module, settings))
    }

    /// A slot with settings already configured, and no instance kept yet.
    pub fn new(module: Arc<PolicyModule>, settings: Settings) -> Self {
        Self {
            module,
            settings,
            session: Session::default(),
        }
    }

    /// The policy's name (its state blob is kept under it).
    pub fn name(&self) -> &str {
        self.module.name()
    }
}
