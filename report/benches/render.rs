//! Report speed and size for a run of 100,000 tasks: reading its journal
//! (`Timeline::from_journal`) and writing the page (`Page::render`),
//! median of 5. The journal is written here in the runtime's own record
//! format: 64 one-core and 4-core tasks on 64 cores over about an hour,
//! 1% failing with a dependent skipped, a few retried.
//!
//!     cargo bench -p slurp-report --bench render

use std::io::Write;
use std::time::{Duration, Instant};

use slurp_report::timeline::Header;
use slurp_report::{Page, Section, Timeline};
use slurp_runtime::core::State;
use slurp_runtime::journal::Record;

const TASKS: usize = 100_000;
const CORES: u32 = 64;

/// A deterministic journal: tasks packed greedily on the earliest free cores.
fn journal(path: &std::path::Path) {
    let mut out = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    let mut line = |r: &Record| {
        serde_json::to_writer(&mut out, r).unwrap();
        out.write_all(b"\n").unwrap();
    };
    line(&Record::Header {
        run: "bench".into(),
        pid: 1,
        workflow: "bench.slurp".into(),
        path: "/bench.slurp".into(),
        args: Vec::new(),
        resumes: None,
        started: 1_795_000_000,
        format: 1,
        boot: String::new(),
    });
    let mut free_at = vec![0u64; CORES as usize];
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut rand = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let mut end = 0;
    for i in 0..TASKS {
        let id = format!("sim[{i}]");
        let width = if i % 10 == 0 { 4 } else { 1 };
        let mut cores: Vec<u32> = (0..CORES).collect();
        cores.sort_by_key(|&c| (free_at[c as usize], c));
        cores.truncate(width);
        cores.sort_unstable();
        let start = cores.iter().map(|&c| free_at[c as usize]).max().unwrap();
        let run = 500 + rand() % 4000;
        let fails = rand() % 100 == 0;
        let retried = rand() % 200 == 0;
        let attempts = if retried { 2 } else { 1 };
        let mut t = start;
        for a in 0..attempts {
            line(&Record::Start {
                t,
                task: id.clone(),
                attempt: a + 1,
                nodes: vec![0],
                cores: vec![cores.clone()],
                gpus: vec![vec![]],
                cohort: None,
            });
            t += run;
            let to = if a + 1 < attempts {
                State::Runnable
            } else if fails {
                State::Failed
            } else {
                State::Succeeded
            };
            line(&Record::State {
                t,
                task: id.clone(),
                to,
                reason: if to == State::Failed {
                    serde_json::json!({"ended": {"exit": 1}})
                } else {
                    serde_json::json!({"ended": "success"})
                },
                key: None,
                src: to.is_final().then(|| "bench.slurp:2".to_owned()),
                cohort: None,
            });
        }
        if fails {
            line(&Record::State {
                t,
                task: format!("post[{i}]"),
                to: State::Skipped,
                reason: serde_json::json!({"dependency": id}),
                key: None,
                src: Some("bench.slurp:3".to_owned()),
                cohort: None,
            });
        }
        for &c in &cores {
            free_at[c as usize] = t;
        }
        end = end.max(t);
    }
    line(&Record::End {
        t: end,
        interrupted: false,
    });
}

fn median(mut times: Vec<Duration>) -> Duration {
    times.sort();
    times[times.len() / 2]
}

fn main() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("events.jsonl");
    journal(&path);
    let journal_size = std::fs::metadata(&path).unwrap().len();
    let (mut read, mut render, mut html_len) = (Vec::new(), Vec::new(), 0);
    for _ in 0..5 {
        let started = Instant::now();
        let (timeline, header, _): (Timeline, Header, _) = Timeline::from_journal(&path).unwrap();
        read.push(started.elapsed());
        let started = Instant::now();
        let page = Page {
            title: header.workflow.clone(),
            summary: vec![("run".into(), header.run.clone())],
            figures: Vec::new(),
            sections: vec![Section {
                title: String::new(),
                timeline,
            }],
        };
        let html = page.render();
        render.push(started.elapsed());
        html_len = html.len();
    }
    let (read, render) = (median(read), median(render));
    println!(
        "report of {TASKS} tasks (+ skipped dependents) on {CORES} cores: journal {:.1} MB read in {:.0} ms, page rendered in {:.0} ms, total {:.0} ms; page {:.1} MB",
        journal_size as f64 / 1e6,
        read.as_secs_f64() * 1e3,
        render.as_secs_f64() * 1e3,
        (read + render).as_secs_f64() * 1e3,
        html_len as f64 / 1e6
    );
}
