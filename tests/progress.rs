//! The live display: bars only on a terminal (run here under a real
//! pseudo-terminal), plain status lines with `--progress` elsewhere, and
//! task output never cut by either.

mod common;

use common::{Test, on_terminal};

/// Tasks that take a while and print long lines, one by one.
fn chatty() -> Test {
    let payload = "x".repeat(90);
    Test::new().file(
        "flow.slurp",
        format!(
            "task s[i=1..16]: sh -c 'for k in 1 2 3 4 5; do echo \"s{{i}}-$k {payload}\"; sleep 0.05; done'\n\
             task sub cores=2: slurp child.slurp\n"
        ),
    )
    .file("child.slurp", "task c[i=1..4]: sleep 0.6\n")
}

/// What a person sees once the run is over: the terminal's screen, tall
/// enough to keep every line, after replaying all it received.
fn screen(out: &str) -> Vec<String> {
    let mut parser = vt100::Parser::new(1000, 120, 0);
    parser.process(out.as_bytes());
    parser
        .screen()
        .contents()
        .lines()
        .map(str::to_owned)
        .collect()
}

#[test]
fn bars_show_on_a_terminal_and_never_cut_a_line_of_output() {
    let t = chatty();
    let (out, status) = on_terminal(&t, &["--cores", "4", "--output", "tag", "flow.slurp"], &[]);
    assert_eq!(status, 0, "{out}");
    // The display was there: the counts, running tasks with their time,
    // the nested instance's own line.
    assert!(out.contains("/20 done"), "no progress line:\n{out}");
    // `  s[7]  0.4s`: some task listed with its running time.
    let listed = out.match_indices("  s[").any(|(i, _)| {
        out[i + 4..].split_once("]  ").is_some_and(|(n, time)| {
            n.parse::<u32>().is_ok()
                && time
                    .split('s')
                    .next()
                    .is_some_and(|t| t.parse::<f64>().is_ok())
        })
    });
    assert!(listed, "no running task listed with its time:\n{out:?}");
    assert!(
        out.contains("  sub/  ") && out.contains("/4 done"),
        "no line for the instance:\n{out}"
    );
    // On the screen, every line of task output is there whole, once, and
    // the display left nothing behind.
    let lines = screen(&out);
    let payload = "x".repeat(90);
    for i in 1..=16 {
        for k in 1..=5 {
            let line = format!("[s[{i}]] s{i}-{k} {payload}");
            let seen = lines.iter().filter(|l| l.trim_end() == line).count();
            assert_eq!(
                seen,
                1,
                "line s{i}-{k} was cut, overwritten or doubled:\n{}",
                lines.join("\n")
            );
        }
    }
    assert!(
        !lines.iter().any(|l| l.contains(" done,")),
        "the display outlived the run:\n{}",
        lines.join("\n")
    );
    assert_eq!(
        lines.iter().filter(|l| l.starts_with("slurp: ")).count(),
        1,
        "one summary line"
    );
}

#[test]
fn no_color_leaves_colours_out_of_the_display() {
    let t = chatty();
    let (out, status) = on_terminal(
        &t,
        &["--cores", "4", "--output", "tag", "flow.slurp"],
        &[("NO_COLOR", "1")],
    );
    assert_eq!(status, 0, "{out}");
    assert!(out.contains("/20 done"), "{out}");
    // Cursor moves stay; colours (SGR 30–37, 90–97) go.
    for code in 30..=37 {
        assert!(
            !out.contains(&format!("\x1b[{code}m")),
            "colour {code} under NO_COLOR"
        );
    }
}

#[test]
fn quiet_shows_neither_bars_nor_a_summary_of_success() {
    let t = chatty();
    let (out, status) = on_terminal(&t, &["--cores", "4", "--quiet", "flow.slurp"], &[]);
    assert_eq!(status, 0, "{out}");
    assert!(!out.contains('\x1b'), "escape codes under --quiet: {out:?}");
    assert!(!out.contains("slurp:"), "{out}");
    assert_eq!(
        screen(&out).iter().filter(|l| l.starts_with("s")).count(),
        80,
        "task output still shows"
    );
}

#[test]
fn quiet_still_reports_what_failed() {
    let t = Test::new().file("flow.slurp", "task bad: sh -c 'exit 4'\n");
    let (out, status) = on_terminal(&t, &["--quiet", "flow.slurp"], &[]);
    assert_eq!(status, 1);
    assert!(out.contains("failed    bad  exit status 4"), "{out}");
}

#[test]
fn piped_output_has_no_escape_codes_and_no_status_unless_asked() {
    let t = chatty().args(&["--cores", "4", "--output", "tag", "flow.slurp"]);
    let run = t.run().success();
    assert!(!run.stdout.contains('\x1b') && !run.stderr.contains('\x1b'));
    assert!(
        !run.stderr.contains("done,"),
        "status lines without --progress:\n{}",
        run.stderr
    );
    assert_eq!(run.stdout.lines().count(), 80, "every line of output");
}

#[test]
fn progress_prints_plain_status_lines_where_there_is_no_terminal() {
    let t = Test::new()
        .file("flow.slurp", "task s[i=1..6]: sleep 0.8\n")
        .args(&["--cores", "2", "--progress=1s", "flow.slurp"]);
    let run = t.run().success();
    assert!(!run.stderr.contains('\x1b'), "{:?}", run.stderr);
    let status: Vec<&str> = run.stderr.lines().filter(|l| l.contains(" done")).collect();
    assert!(
        status.len() >= 2,
        "a line a second over ~2.4 s:\n{}",
        run.stderr
    );
    // `slurp: 2/6 done, 2 running, 1.0 tasks/s, ETA 4.0s`
    let first = status[0];
    assert!(
        first.starts_with("slurp: ") && first.contains("/6 done, ") && first.contains(" running"),
        "{first}"
    );
    assert!(
        status.iter().any(|l| l.contains("tasks/s, ETA ")),
        "{status:?}"
    );
}

#[test]
fn a_bad_progress_interval_is_refused_before_anything_runs() {
    Test::new()
        .file("flow.slurp", "echo hi\n")
        .args(&["--progress=soon", "flow.slurp"])
        .run()
        .invalid()
        .stderr_has(&["`--progress soon`", "such as 10s"]);
}
