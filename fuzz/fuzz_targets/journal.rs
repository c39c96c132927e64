//! The journal reader: any bytes as `events.jsonl`, a replay out (damaged
//! lines counted), never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let dir = tempfile::tempdir().expect("a temp dir");
    let path = dir.path().join("events.jsonl");
    std::fs::write(&path, data).expect("write the input");
    if let Ok(replay) = slurp_runtime::journal::replay(&path) {
        let _ = replay.counts();
        let _ = replay.live();
    }
});
