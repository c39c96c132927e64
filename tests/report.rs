//! `slurp report` and `slurp sim --report`: what the HTML shows, checked in
//! the file and, as a person would see it, in a real headless Chromium
//! driven over WebDriver (Debian's `chromium` and `chromium-driver`;
//! `scripts/test-deps.sh` installs them).

mod common;

use std::collections::BTreeMap;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{Test, binary};
use serde_json::{Value, json};

/// A run with every kind of bar: successes, a failure and the task it
/// skips, a retried task, a nested instance with its own tasks.
fn finished_run() -> Test {
    let t = Test::new()
        .file(
            "flow.slurp",
            "task prep: echo prep\n\
             task sim[i=1..6] after=prep: sh -c 'sleep 0.1; echo {i}'\n\
             task bad after=prep: sh -c 'exit 3'\n\
             task post after=bad: echo never\n\
             task flaky retries=1: sh -c 'test -e flag || { touch flag; exit 1; }'\n\
             task sub cores=2: slurp child.slurp\n",
        )
        .file("child.slurp", "task c[i=1..2]: sh -c 'sleep 0.3'\n")
        .args(&["--cores", "4", "flow.slurp"]);
    let run = t.run();
    assert_eq!(run.status, 1, "one task fails: {}", run.stderr);
    t
}

fn slurp(dir: &Path, args: &[&str]) -> std::process::Output {
    Command::new(binary())
        .args(args)
        .current_dir(dir)
        .output()
        .expect("run slurp")
}

fn write_report(t: &Test) -> (PathBuf, String) {
    let out = slurp(t.path(), &["report", "-o", "report.html"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let path = t.path().join("report.html");
    let html = std::fs::read_to_string(&path).expect("report written");
    (path, html)
}

/// The `class` and `data-task` of every `element` of the Gantt charts.
fn marks(html: &str, element: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let charts: String = html
        .split("<svg class=\"gantt\"")
        .skip(1)
        .filter_map(|svg| svg.split("</svg>").next())
        .collect();
    for piece in charts.split(&format!("<{element} class=\"")).skip(1) {
        let class = piece.split('"').next().unwrap_or_default().to_owned();
        let task = piece
            .split("data-task=\"")
            .nth(1)
            .and_then(|r| r.split('"').next())
            .unwrap_or_default()
            .to_owned();
        out.push((class, task));
    }
    out
}

#[test]
fn the_chart_has_a_bar_per_attempt_coloured_by_how_it_ended() {
    let t = finished_run();
    let (_, html) = write_report(&t);
    let mut bars: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (class, task) in marks(&html, "rect")
        .into_iter()
        .filter(|(c, _)| c.starts_with("bar "))
    {
        bars.entry(task).or_default().push(class);
    }
    let ran = [
        "prep", "sim[1]", "sim[2]", "sim[3]", "sim[4]", "sim[5]", "sim[6]", "bad", "flaky",
        "sub/c[1]", "sub/c[2]",
    ];
    assert_eq!(bars.keys().cloned().collect::<Vec<_>>(), {
        let mut v: Vec<String> = ran.iter().map(|s| s.to_string()).collect();
        v.sort();
        v
    });
    assert_eq!(bars["bad"], ["bar failed"]);
    assert_eq!(
        bars["flaky"],
        ["bar retried", "bar succeeded"],
        "two attempts, the first retried"
    );
    assert_eq!(bars["sim[3]"], ["bar succeeded"]);
    // The skipped task never ran: a marker, not a bar.
    let never = marks(&html, "path");
    assert_eq!(never, [("never skipped".to_owned(), "post".to_owned())]);
    // The nested entry outlines its instance's slice.
    let groups: Vec<_> = marks(&html, "rect")
        .into_iter()
        .filter(|(c, _)| c == "group")
        .collect();
    assert_eq!(groups, [("group".to_owned(), "sub".to_owned())]);
    // The table has every task, with its line.
    let rows = html
        .split("id=\"rows0\">")
        .nth(1)
        .and_then(|r| r.split("</script>").next())
        .unwrap();
    let rows: Vec<Value> = serde_json::from_str(rows).expect("rows are JSON");
    assert_eq!(rows.len(), 13);
    let bad = rows.iter().find(|r| r[0] == "bad").unwrap();
    assert_eq!(bad[1], "failed");
    assert_eq!(bad[4], "exit 3");
    assert_eq!(bad[6], "flow.slurp:3");
    let child = rows.iter().find(|r| r[0] == "sub/c[2]").unwrap();
    assert_eq!(child[6], "child.slurp:1");
    // Self-contained: nothing is fetched.
    for fetch in ["src=", "href=", "url(", "@import"] {
        assert!(
            !html.contains(fetch),
            "the report fetches something: {fetch}"
        );
    }
}

#[test]
fn nested_tasks_run_inside_their_entrys_slice() {
    let t = finished_run();
    let (_, html) = write_report(&t);
    // y and height of a rect, to compare lanes.
    let span = |class: &str, task: &str| -> (f64, f64) {
        let piece = html
            .split(&format!("<rect class=\"{class}\" data-task=\"{task}\""))
            .nth(1)
            .unwrap_or_else(|| panic!("no {class} {task}"));
        let attr = |name: &str| -> f64 {
            piece
                .split(&format!(" {name}=\""))
                .nth(1)
                .unwrap()
                .split('"')
                .next()
                .unwrap()
                .parse()
                .unwrap()
        };
        (attr("y"), attr("y") + attr("height"))
    };
    let slice = span("group", "sub");
    for child in ["sub/c[1]", "sub/c[2]"] {
        let (top, bottom) = span("bar succeeded", child);
        assert!(
            top >= slice.0 && bottom <= slice.1 + 1e-9,
            "{child} {top}..{bottom} outside {slice:?}"
        );
    }
}

#[test]
fn a_report_needs_a_run() {
    let t = Test::new();
    let out = slurp(t.path(), &["report", "-o", "r.html"]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("no runs here"), "{stderr}");
    assert!(!t.path().join("r.html").exists());
}

#[test]
fn a_simulation_report_has_each_policys_schedule() {
    let t = Test::new();
    let trace = common::repo().join("sim/tests/data/lublin256-2001-3024.swf");
    let out = slurp(
        t.path(),
        &[
            "sim",
            trace.to_str().unwrap(),
            "--policy",
            "fcfs,sjf+easy",
            "--window",
            "0:50",
            "--report",
            "sim.html",
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let html = std::fs::read_to_string(t.path().join("sim.html")).unwrap();
    assert!(html.contains("<h2>fcfs: schedule of jobs 0:50</h2>"));
    assert!(html.contains("<h2>sjf+easy: schedule of jobs 0:50</h2>"));
    // Every job of the window, once per policy, and never two on one processor at once.
    for section in html.split("<section").skip(1) {
        let bars: Vec<_> = marks(section, "rect")
            .into_iter()
            .filter(|(c, _)| c.starts_with("bar"))
            .collect();
        let jobs: std::collections::BTreeSet<_> = bars.iter().map(|(_, t)| t.clone()).collect();
        assert_eq!(jobs.len(), 50);
    }
    assert!(
        html.contains("<td>fcfs</td>") && html.contains("<td>sjf+easy</td>"),
        "figures table"
    );
}

// --- In a real browser ----------------------------------------------------

/// A chromedriver of our own on a free port, killed when dropped.
struct Driver {
    child: Child,
    base: String,
    session: String,
}

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = ureq::delete(&format!("{}/session/{}", self.base, self.session)).call();
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Driver {
    fn start() -> Driver {
        for tool in ["/usr/bin/chromium", "/usr/bin/chromedriver"] {
            assert!(
                Path::new(tool).exists(),
                "{tool} is missing: the browser test needs Debian's chromium and chromium-driver (scripts/test-deps.sh installs them)"
            );
        }
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let child = Command::new("/usr/bin/chromedriver")
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start chromedriver");
        let base = format!("http://127.0.0.1:{port}");
        let deadline = Instant::now() + Duration::from_secs(20);
        while ureq::get(&format!("{base}/status")).call().is_err() {
            assert!(Instant::now() < deadline, "chromedriver did not come up");
            std::thread::sleep(Duration::from_millis(100));
        }
        let mut driver = Driver {
            child,
            base,
            session: String::new(),
        };
        let created = driver.post(
            "/session",
            json!({"capabilities": {"alwaysMatch": {
                "browserName": "chrome",
                "goog:chromeOptions": {
                    "binary": "/usr/bin/chromium",
                    "args": ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1300,1400"]
                },
                "goog:loggingPrefs": {"browser": "ALL"}
            }}}),
        );
        driver.session = created["sessionId"].as_str().expect("a session").to_owned();
        driver
    }

    fn post(&self, path: &str, body: Value) -> Value {
        let url = if self.session.is_empty() {
            format!("{}{path}", self.base)
        } else {
            format!("{}/session/{}{path}", self.base, self.session)
        };
        let mut response = ureq::post(&url)
            .send_json(body)
            .unwrap_or_else(|e| panic!("POST {path}: {e}"));
        let value: Value = response.body_mut().read_json().expect("JSON");
        value["value"].clone()
    }

    fn get(&self, path: &str) -> Value {
        let url = format!("{}/session/{}{path}", self.base, self.session);
        let mut response = ureq::get(&url)
            .call()
            .unwrap_or_else(|e| panic!("GET {path}: {e}"));
        let value: Value = response.body_mut().read_json().expect("JSON");
        value["value"].clone()
    }

    fn script(&self, code: &str) -> Value {
        self.post("/execute/sync", json!({"script": code, "args": []}))
    }
}

#[test]
fn the_report_reads_right_in_a_real_browser() {
    let t = finished_run();
    let (path, _) = write_report(&t);
    let driver = Driver::start();
    driver.post("/url", json!({"url": format!("file://{}", path.display())}));
    // What is drawn: bars with a size on screen, per task.
    let seen = driver.script(
        r#"const bars = [...document.querySelectorAll("svg.gantt rect.bar")];
           const per = {};
           for (const b of bars) { const r = b.getBoundingClientRect();
             if (r.width > 0 && r.height > 0) (per[b.dataset.task] ??= []).push(b.classList[1]); }
           return {per, failedColour: getComputedStyle(document.querySelector("rect.bar.failed")).fill,
                   okColour: getComputedStyle(document.querySelector("rect.bar.succeeded")).fill,
                   fetched: performance.getEntriesByType("resource").length,
                   rows: document.querySelectorAll("table.tasks tbody tr").length,
                   shown: document.querySelector(".shown").textContent};"#,
    );
    let per = seen["per"].as_object().unwrap();
    assert_eq!(per.len(), 11, "one bar per task that ran: {per:?}");
    assert_eq!(per["bad"], json!(["failed"]));
    assert_eq!(per["flaky"], json!(["retried", "succeeded"]));
    assert_ne!(
        seen["failedColour"], seen["okColour"],
        "the failed task stands out"
    );
    assert_eq!(seen["fetched"], 0, "the page fetched nothing");
    assert_eq!(seen["rows"], 13);
    assert_eq!(seen["shown"], "13 of 13 tasks shown");
    // The table sorts: click `duration` twice for the longest first.
    let order = |d: &Driver| -> Vec<String> {
        serde_json::from_value(d.script(
            r#"return [...document.querySelectorAll("table.tasks tbody tr td:first-child")].map(td => td.textContent);"#,
        ))
        .unwrap()
    };
    for _ in 0..2 {
        driver.script(r#"document.querySelectorAll("table.tasks th")[3].click(); return null;"#);
    }
    let longest_first = order(&driver);
    assert_eq!(
        longest_first[0], "sub",
        "the nested entry outlasts each of its tasks: {longest_first:?}"
    );
    // Filtering keeps what matches.
    driver.script(
        r#"const f = document.querySelector("input.filter"); f.value = "failed"; f.dispatchEvent(new Event("input")); return null;"#,
    );
    assert_eq!(order(&driver), ["bad"]);
    // Clicking a row marks its bar.
    driver.script(r#"document.querySelector("table.tasks tbody tr").click(); return null;"#);
    let marked = driver.script(
        r#"return [...document.querySelectorAll("rect.bar.highlight")].map(b => b.dataset.task);"#,
    );
    assert_eq!(marked, json!(["bad"]));
    // No script errors, no failed loads.
    let logs = driver.post("/se/log", json!({"type": "browser"}));
    let severe: Vec<&Value> = logs
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["level"] == "SEVERE")
        .collect();
    assert!(severe.is_empty(), "browser errors: {severe:?}");
    // A screenshot, kept as an artifact of the test run.
    let png = driver.get("/screenshot");
    use base64::Engine;
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(png.as_str().unwrap())
        .unwrap();
    assert!(bytes.starts_with(b"\x89PNG"), "a PNG screenshot");
    let dir = common::repo().join("target/artifacts");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("report.png"), bytes).unwrap();
}

#[test]
fn a_live_run_is_reported_as_far_as_its_journal_goes() {
    let (dir, mut child, _) = common::start_run(
        &[(
            "w.slurp",
            // `slow` starts once `quick`'s end is in the journal (written
            // before slurp acts on it): started together, the report
            // could read the journal before `quick`'s end reached it.
            "task quick: true\ntask slow after=quick: sh -c 'echo $$ > pid; sleep 30'\n",
        )],
        &["--cores", "2", "w.slurp"],
        &["pid"],
    );
    let out = slurp(dir.path(), &["report", "-o", "live.html"]);
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let html = std::fs::read_to_string(dir.path().join("live.html")).unwrap();
    let bars = marks(&html, "rect");
    assert!(
        bars.contains(&("bar running".to_owned(), "slow".to_owned())),
        "{bars:?}"
    );
    assert!(
        bars.contains(&("bar succeeded".to_owned(), "quick".to_owned())),
        "{bars:?}"
    );
    assert!(
        html.contains("not yet, or killed"),
        "the summary says the run has not ended"
    );
}

/// A sweep whose journal was rewritten keeps its successes as ranges: the
/// report counts them ("not drawn") and still draws what did not succeed.
#[test]
fn a_rewritten_sweep_is_counted_whole_and_its_failure_drawn() {
    let t = Test::new()
        .file("w.slurp", "task s[i=1..400]: sh -c 'test {i} != 5'\n")
        .env("SLURP_JOURNAL_COMPACT", "1")
        .args(&["--cores", "2", "w.slurp"]);
    assert_eq!(t.run().status, 1);
    let (_, html) = write_report(&t);
    assert!(
        html.contains("<dt>tasks</dt><dd>400: 399 succeeded, 1 failed</dd>"),
        "{html}"
    );
    assert!(html.contains("<dt>not drawn</dt>"), "{html}");
    let failed: Vec<_> = marks(&html, "rect")
        .into_iter()
        .filter(|(c, _)| c == "bar failed")
        .collect();
    assert_eq!(failed, [("bar failed".to_owned(), "s[5]".to_owned())]);
}
