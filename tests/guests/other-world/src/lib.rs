//! A component of an unrelated world (`example:other/greeter`).

wit_bindgen::generate!({ path: "wit", world: "greeter" });

pub struct Greeter;

impl Guest for Greeter {
    fn greet(name: String) -> String {
        format!("hello, {name}")
    }
}

// The export names contain `:`, which only the component linker accepts; a native
// build (unit tests, clippy) leaves them out.
#[cfg(target_arch = "wasm32")]
export!(Greeter);
