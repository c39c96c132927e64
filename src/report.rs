//! `slurp report [RUN] -o FILE`: a run's journal as one HTML file, and the
//! pages `slurp sim --report` writes.

use std::io;
use std::path::Path;
use std::process::ExitCode;

use slurp_report::timeline::{Builder, TimeUnit};
use slurp_report::{Page, Section, Timeline};
use slurp_runtime::core::State;

/// Writes the report of `run` (default: the latest) to `out`.
pub fn report(run: Option<&str>, out: &Path) -> io::Result<ExitCode> {
    let dir = match crate::console::chosen_run(run)? {
        Ok(dir) => dir,
        Err(code) => return Ok(code),
    };
    let (timeline, header, damage) = Timeline::from_journal(&dir.join("events.jsonl"))?;
    if let Some(why) = damage.fatal() {
        eprintln!("error: {why}; no report written");
        return Ok(ExitCode::from(1));
    }
    if let Some(note) = damage.skipped() {
        eprintln!("note: {note}");
    }
    let page = run_page(&timeline, &header);
    write_page(out, &page)?;
    eprintln!(
        "slurp: report of run {} ({} tasks) written to {}",
        header.run,
        timeline.total(),
        out.display()
    );
    Ok(ExitCode::SUCCESS)
}

/// The page of one run.
pub fn run_page(timeline: &Timeline, header: &slurp_report::timeline::Header) -> Page {
    let counts = timeline.counts();
    let mut parts: Vec<String> = State::ALL
        .iter()
        .filter(|s| counts[**s as usize] > 0)
        .map(|s| format!("{} {}", counts[*s as usize], s.name()))
        .collect();
    let unstarted: u64 = timeline.summarised.iter().map(|s| s.unstarted).sum();
    if unstarted > 0 {
        parts.push(format!("{unstarted} never started"));
    }
    let cores = timeline.lanes.iter().filter(|l| !l.gpu).count();
    let gpus = timeline.lanes.len() - cores;
    let nodes = {
        let mut n: Vec<u32> = timeline.lanes.iter().map(|l| l.node).collect();
        n.dedup();
        n.len()
    };
    let took = slurp_report::gantt::duration(timeline.horizon as f64 / 1000.0);
    let mut summary = vec![
        ("run".to_owned(), header.run.clone()),
        ("workflow".to_owned(), header.workflow.clone()),
        ("started".to_owned(), utc(header.started)),
        (
            "ended".to_owned(),
            match header.ended {
                Some(false) => format!("after {took}"),
                Some(true) => format!("interrupted after {took}"),
                None => format!("not yet, or killed: {took} on record"),
            },
        ),
        (
            "tasks".to_owned(),
            format!("{}: {}", timeline.total(), parts.join(", ")),
        ),
        (
            "used".to_owned(),
            format!(
                "{cores} core{} and {gpus} GPU{} on {nodes} node{}",
                plural(cores),
                plural(gpus),
                plural(nodes)
            ),
        ),
        (
            "utilisation".to_owned(),
            format!(
                "{:.1}% of the cores used, over the run",
                100.0 * timeline.utilisation()
            ),
        ),
    ];
    let (summarised, of) = timeline.summarised();
    if summarised > 0 {
        summary.push((
            "not drawn".to_owned(),
            format!(
                "{summarised} sweep member{} that succeeded, kept by the journal only as ranges: {of}",
                if summarised == 1 { "" } else { "s" }
            ),
        ));
    }
    Page {
        title: format!("slurp run {}", header.workflow),
        summary,
        figures: Vec::new(),
        sections: vec![Section {
            title: String::new(),
            timeline: timeline.clone(),
        }],
    }
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

/// Seconds since the epoch as `YYYY-MM-DD HH:MM:SS UTC`.
fn utc(secs: u64) -> String {
    let days = secs / 86400;
    let (h, m, s) = (secs / 3600 % 24, secs / 60 % 60, secs % 60);
    // Civil from days (Howard Hinnant's algorithm).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{d:02} {h:02}:{m:02}:{s:02} UTC")
}

/// Writes the page, replacing `out` whole (a reader never sees half).
pub fn write_page(out: &Path, page: &Page) -> io::Result<()> {
    let html = page.render();
    let tmp = out.with_extension("html.part");
    std::fs::write(&tmp, html)?;
    std::fs::rename(&tmp, out)
}

/// A simulated schedule as a timeline: each job on the lowest free
/// processors (the simulator counts processors, it does not name them).
pub fn sim_timeline(jobs: &[(String, u64, u64, u32)], nodes: u32, per_node: u32) -> Timeline {
    let procs = nodes * per_node;
    // (start, run, width) by start; free processors kept sorted.
    let mut order: Vec<usize> = (0..jobs.len()).collect();
    order.sort_by_key(|&j| (jobs[j].1, j));
    let mut free: std::collections::BTreeSet<u32> = (0..procs).collect();
    let mut ends: std::collections::BinaryHeap<std::cmp::Reverse<(u64, usize)>> =
        std::collections::BinaryHeap::new();
    let mut held: Vec<Vec<u32>> = vec![Vec::new(); jobs.len()];
    for &j in &order {
        let (_, start, run, width) = &jobs[j];
        while let Some(std::cmp::Reverse((end, k))) = ends.peek().copied() {
            if end > *start {
                break;
            }
            ends.pop();
            free.extend(held[k].iter().copied());
        }
        let take: Vec<u32> = free.iter().take(*width as usize).copied().collect();
        for p in &take {
            free.remove(p);
        }
        held[j] = take;
        ends.push(std::cmp::Reverse((start + run, j)));
    }
    let mut builder = Builder::default();
    for &j in &order {
        let (id, start, run, _) = &jobs[j];
        // Processor p is core p % per_node of node p / per_node.
        let mut nodes: Vec<u32> = Vec::new();
        let mut cores: Vec<Vec<u32>> = Vec::new();
        for &p in &held[j] {
            let node = p / per_node.max(1);
            if nodes.last() != Some(&node) {
                nodes.push(node);
                cores.push(Vec::new());
            }
            if let Some(last) = cores.last_mut() {
                last.push(p % per_node.max(1));
            }
        }
        let gpus = vec![Vec::new(); nodes.len()];
        builder.start(*start, id, &nodes, &cores, &gpus);
        builder.state(
            start + run,
            id,
            State::Succeeded,
            &serde_json::Value::Null,
            None,
        );
    }
    builder.finish(TimeUnit::Seconds)
}

/// `slurp sim --report`: the figures of every policy, then each policy's
/// schedule of the first window.
pub fn sim_page(
    title: String,
    workload: &slurp_sim::Workload,
    model: slurp_sim::Model,
    results: &[slurp_sim::PolicyResult],
    schedules: &[slurp_sim::Schedule],
) -> Page {
    let machine = workload.machine;
    let (head, rows) = crate::sim::figures(results);
    let figures = slurp_report::page::Figures {
        caption: "Figures per policy".to_owned(),
        head: head.map(str::to_owned).to_vec(),
        rows: rows.into_iter().map(|r| r.to_vec()).collect(),
    };
    let sections = results
        .iter()
        .zip(schedules)
        .map(|(result, schedule)| {
            let w = schedule.window;
            let jobs = &workload.jobs[w.start..w.start + w.len];
            let origin = jobs.iter().map(|j| j.submit).min().unwrap_or(0);
            // The reference model gives every job whole nodes.
            let width = |procs: u32| match model {
                slurp_sim::Model::Reference => machine.nodes_for(procs) * machine.procs_per_node,
                slurp_sim::Model::Slurp => procs,
            };
            let placed: Vec<(String, u64, u64, u32)> = jobs
                .iter()
                .zip(&schedule.starts)
                .map(|(j, &start)| {
                    (
                        format!("job {} (user {})", j.id, j.user),
                        start - origin,
                        j.run,
                        width(j.procs),
                    )
                })
                .collect();
            Section {
                title: format!("{}: schedule of jobs {w}", result.policy),
                timeline: sim_timeline(&placed, machine.nodes, machine.procs_per_node),
            }
        })
        .collect();
    Page {
        title,
        summary: vec![
            ("machine".to_owned(), format!("{machine}")),
            ("model".to_owned(), model.name().to_owned()),
            (
                "trace".to_owned(),
                format!(
                    "{} replayable",
                    crate::sim::plural(workload.jobs.len(), "job")
                ),
            ),
        ],
        figures: vec![figures],
        sections,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utc_dates() {
        assert_eq!(utc(0), "1970-01-01 00:00:00 UTC");
        assert_eq!(utc(1_795_995_583), "2026-11-29 23:39:43 UTC");
        assert_eq!(utc(951_782_400), "2000-02-29 00:00:00 UTC");
    }

    #[test]
    fn simulated_jobs_never_share_a_processor() {
        let jobs = vec![
            ("a".to_owned(), 0, 10, 2),
            ("b".to_owned(), 0, 5, 1),
            ("c".to_owned(), 5, 10, 2),
            ("d".to_owned(), 10, 1, 1),
        ];
        let t = sim_timeline(&jobs, 2, 2);
        let held = |id: &str| t.tasks.iter().find(|x| x.id == id).unwrap().attempts[0].clone();
        assert_eq!(held("a").lanes, vec![0, 1]);
        assert_eq!(held("b").lanes, vec![2]);
        // b's processor is free again at 5; a's are not until 10.
        assert_eq!(held("c").lanes, vec![2, 3]);
        assert_eq!(held("d").lanes, vec![0]);
    }
}
