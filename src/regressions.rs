//! Fuzz findings, kept as tests that run on stable with `cargo test`.
//!
//! Every input in `fuzz/seeds/<target>/` and `fuzz/regressions/<target>/`
//! goes through the very checks the fuzz targets run (`fuzz/checks.rs`,
//! included here). A crash found by `scripts/fuzz` becomes a regression by
//! copying its artifact into `fuzz/regressions/<target>/` under a name that
//! says what it broke; a finding worth reading as code gets a test below.

use std::path::{Path, PathBuf};

// `checks` names this crate `dq`, as the fuzz targets do.
use crate as dq;

#[path = "../fuzz/checks.rs"]
mod checks;

/// The files of `fuzz/<kind>/<target>/`, sorted; none when it is absent.
fn inputs(kind: &str, target: &str) -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fuzz")
        .join(kind)
        .join(target);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .map(|entries| entries.filter_map(|e| e.ok().map(|e| e.path())).collect())
        .unwrap_or_default();
    files.retain(|p| p.is_file());
    files.sort();
    files
}

/// Runs `check` on every seed and past finding of `target`, which must
/// have seeds.
fn replay(target: &str, check: fn(&[u8])) {
    let seeds = inputs("seeds", target);
    for path in seeds.iter().chain(&inputs("regressions", target)) {
        let data = std::fs::read(path).expect("read a fuzz input");
        // Printed before the check, so a failure names its input.
        println!("{}", path.display());
        check(&data);
    }
    assert!(!seeds.is_empty(), "no seeds in fuzz/seeds/{target}");
}

#[test]
fn argument_parsers_hold_on_seeds_and_findings() {
    replay("args", checks::args);
}

#[test]
fn replays_hold_on_seeds_and_findings() {
    replay("replay", checks::replay);
}

#[test]
fn glob_matches_as_redis_on_seeds_and_findings() {
    replay("glob", checks::glob);
}

#[test]
fn envelope_decoding_holds_on_seeds_and_findings() {
    replay("envelope", checks::envelope);
}

#[test]
fn queue_loading_holds_on_seeds_and_findings() {
    replay("queue", checks::queue);
}

/// The `queue` seeds are saved queues in frames; this writes them again
/// after a deliberate encoding change (`cargo test -- --ignored`).
#[test]
#[ignore]
fn write_queue_seeds() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/seeds/queue");
    std::fs::create_dir_all(&dir).expect("seed directory");
    for (name, queue) in crate::core::queue::tests::sample_queues() {
        let mut framed = Vec::new();
        let mut frame = |bytes: &[u8]| {
            let len = u16::try_from(bytes.len()).expect("a seed chunk fits a frame");
            framed.extend_from_slice(&len.to_le_bytes());
            framed.extend_from_slice(bytes);
        };
        frame(&crate::core::queue::codec::header(&queue));
        crate::core::queue::codec::record_chunks(&queue, |c| frame(c));
        std::fs::write(dir.join(name), framed).expect("write a seed");
    }
}

/// What the fuzzer's "checksum fixed" mode reaches and the other unit tests
/// do not: a record whose checksum is right but whose body has bytes after
/// the message must be refused, not silently truncated.
#[test]
fn trailing_bytes_behind_a_valid_checksum_are_corrupt() {
    let seed = inputs("seeds", "envelope")
        .into_iter()
        .find(|p| p.ends_with("ready"))
        .expect("the 'ready' envelope seed");
    let mut bytes = std::fs::read(seed).expect("read the seed");
    bytes.push(0);
    let crc = crc32fast::hash(&bytes[5..]);
    bytes[1..5].copy_from_slice(&crc.to_le_bytes());
    let err = crate::legacy::message::Message::decode(b"m", &bytes).expect_err("trailing byte");
    assert!(err.to_string().contains("trailing bytes"), "{err}");
}
