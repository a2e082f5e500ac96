//! Fuzz target; the properties it checks are in `../checks.rs`.

#![no_main]

extern crate dq;

#[path = "../checks.rs"]
mod checks;

libfuzzer_sys::fuzz_target!(|data: &[u8]| checks::queue(data));
