//! A well-formed component that implements some other world, so the tests
//! can check that an upload for the wrong world is refused by name.

wit_bindgen::generate!({ path: "wit", world: "greeter" });

struct Greeter;

impl Guest for Greeter {
    fn greet(name: String) -> String {
        format!("hello {name}")
    }
}

export!(Greeter);
