//! A component of an unrelated world (`example:other/greeter`).

wit_bindgen::generate!({ path: "wit", world: "greeter" });

struct Greeter;

impl Guest for Greeter {
    fn greet(name: String) -> String {
        format!("hello, {name}")
    }
}

export!(Greeter);
