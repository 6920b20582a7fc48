//! The environment of the `cargo test` that runs a test, which must not leak into a
//! build or a shell the test starts for a reader or a policy author. A leaf: it names
//! nothing else of the crate.

/// Variables that steer the outer build (its target directory, flags and wrappers): a
/// nested `cargo` that a test starts for a reader or a policy author must see none of
/// them.
pub const OUTER_BUILD_VARS: [&str; 6] = [
    "CARGO_TARGET_DIR",
    "RUSTFLAGS",
    "CARGO_ENCODED_RUSTFLAGS",
    "CARGO_BUILD_TARGET",
    "RUSTC_WRAPPER",
    "RUSTC_WORKSPACE_WRAPPER",
];
