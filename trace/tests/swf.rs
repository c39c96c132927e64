//! Reading SWF traces: fields, header, compression, and bad lines.

use std::io::Write;
use std::path::{Path, PathBuf};

use slurp_trace::{Malformed, parse, read};

fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name)
}

#[test]
fn fields_header_and_unknowns() {
    let text = "; Version: 2\n; MaxNodes: 128\n; MaxProcs: 256\n;  just a comment\n\n\
                1 0 5 100 8 -1 -1 8 3600 -1 1 3 2 7 1 -1 -1 -1\n\
                2 10 0 20 1 12.5 1024.5 -1 -1 -1 0 4 2 -1 -1 -1 1 30\n";
    let trace = parse(text.as_bytes()).unwrap();
    assert_eq!(trace.max_nodes(), Some(128));
    assert_eq!(trace.max_procs(), Some(256));
    assert_eq!(trace.jobs.len(), 2);
    assert!(trace.malformed.is_empty());
    let a = trace.jobs[0];
    assert_eq!(
        (
            a.id,
            a.submit,
            a.wait,
            a.run,
            a.procs,
            a.req_procs,
            a.req_time,
            a.user
        ),
        (1, 0, 5, 100, 8, 8, 3600, 3)
    );
    assert_eq!(a.req_mem, -1, "unknowns stay -1");
    let b = trace.jobs[1];
    assert_eq!(
        (b.cpu, b.mem, b.status, b.preceding, b.think),
        (12.5, 1024.5, 0, 1, 30)
    );
}

#[test]
fn bad_lines_are_counted_with_their_numbers_and_reading_goes_on() {
    let text = "; MaxProcs: 4\n\
                1 0 0 10 1 -1 -1 1 10 -1 1 1 1 -1 -1 -1 -1 -1\n\
                2 0 0 10 1\n\
                3 0 0 ten 1 -1 -1 1 10 -1 1 1 1 -1 -1 -1 -1 -1\n\
                4 0 0 1.5 1 -1 -1 1 10 -1 1 1 1 -1 -1 -1 -1 -1\n\
                5 0 0 10 1 -1 -1 1 10 -1 1 1 1 -1 -1 -1 -1 -1 99\n\
                6 0 0 10 1 -1 -1 1 10 -1 1 1 1 -1 -1 -1 -1 -1\n";
    let trace = parse(text.as_bytes()).unwrap();
    assert_eq!(trace.jobs.iter().map(|j| j.id).collect::<Vec<_>>(), [1, 6]);
    let malformed: Vec<(usize, &str)> = trace
        .malformed
        .iter()
        .map(|Malformed { line, reason }| (*line, reason.as_str()))
        .collect();
    assert_eq!(
        malformed,
        [
            (3, "5 fields where SWF has 18"),
            (4, "field 4 `ten` is not a number"),
            (5, "field 4 `1.5` is not a whole number"),
            (6, "19 fields where SWF has 18"),
        ]
    );
}

#[test]
fn plain_gz_and_xz_read_the_same() {
    let plain = data("nasa-ipsc-300.swf");
    let text = std::fs::read(&plain).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let gz = dir.path().join("t.swf.gz");
    let mut enc = flate2::write::GzEncoder::new(
        std::fs::File::create(&gz).unwrap(),
        flate2::Compression::default(),
    );
    enc.write_all(&text).unwrap();
    enc.finish().unwrap();
    let xz = dir.path().join("t.swf.xz");
    let mut enc = xz2::write::XzEncoder::new(std::fs::File::create(&xz).unwrap(), 6);
    enc.write_all(&text).unwrap();
    enc.finish().unwrap();
    let a = read(&plain).unwrap();
    assert_eq!(a.jobs.len(), 300);
    assert!(a.malformed.is_empty(), "{:?}", a.malformed);
    assert_eq!(a.max_procs(), Some(128));
    assert_eq!(read(&gz).unwrap(), a);
    assert_eq!(read(&xz).unwrap(), a);
}

#[test]
fn corrupt_compressed_data_is_an_error_not_a_panic() {
    let dir = tempfile::tempdir().unwrap();
    let xz = dir.path().join("bad.swf.xz");
    std::fs::write(&xz, b"this is not xz").unwrap();
    assert!(read(&xz).is_err());
}

/// The project's real traces, when `../shared/traces/` is beside the
/// checkout (as on the project's machines and in CI).
#[test]
fn the_shared_traces_read_whole() {
    let shared = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/traces");
    if !shared.is_dir() {
        eprintln!("skipped: no shared traces at {}", shared.display());
        return;
    }
    let cases = [
        ("lublin_256.swf", 10_000, Some(256), None),
        ("NASA-iPSC-1993-3.1-cln.swf", 18_239, Some(128), Some(128)),
        ("RICC-2010-2.swf.xz", 447_794, Some(1024), Some(8192)),
    ];
    for (name, jobs, nodes, procs) in cases {
        let trace = read(&shared.join(name)).unwrap();
        assert_eq!(trace.jobs.len(), jobs, "{name}");
        assert!(
            trace.malformed.is_empty(),
            "{name}: {:?}",
            &trace.malformed[..trace.malformed.len().min(3)]
        );
        assert_eq!(
            (trace.max_nodes(), trace.max_procs()),
            (nodes, procs),
            "{name}"
        );
    }
}

mod properties {
    use proptest::prelude::*;

    proptest! {
        /// Any bytes: no panic; every non-comment, non-blank line is a job
        /// or a malformed line with its number.
        #[test]
        fn never_panics(input in proptest::collection::vec(any::<u8>(), 0..400)) {
            let trace = slurp_trace::parse(&input[..]).unwrap();
            let lines = input.split(|&b| b == b'\n').count();
            for m in &trace.malformed {
                prop_assert!(m.line >= 1 && m.line <= lines);
            }
        }
    }
}
