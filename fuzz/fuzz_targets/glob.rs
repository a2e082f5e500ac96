//! Fuzz target; the properties it checks are in `../checks.rs`.

#![no_main]

// A crate-root item, so `checks` can name the crate as `super::dq`, as the
// unit test that includes it does.
extern crate dq;

#[path = "../checks.rs"]
mod checks;

libfuzzer_sys::fuzz_target!(|data: &[u8]| checks::glob(data));
