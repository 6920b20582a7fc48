//! What every handler of the API can reach: the controller and the upload limit. Kept
//! apart from the router so that the route modules depend on it and not on their parent.

use crate::live::Controller;

/// What every handler can reach.
#[derive(Clone)]
pub(super) struct ApiState {
    /// The controller the handlers translate to.
    pub(super) controller: Controller,
    /// Largest accepted upload, in bytes.
    pub(super) max_upload_bytes: usize,
}
