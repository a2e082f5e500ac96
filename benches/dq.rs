//! `make bench`: placeholder until the benchmark lands.
fn main() {}
