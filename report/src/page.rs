//! The HTML page: summary, charts and a sortable task table, in one file.
//!
//! Everything is inline — styles, the SVG charts, the table's data (JSON in
//! a `<script type="application/json">`) and the few lines of script that
//! sort, filter and page it — so the file can be mailed, archived or opened
//! from a cluster's scratch space without a network. The charts are drawn
//! here, not by the script, so they show even with scripts off.

use std::fmt::Write;

use crate::gantt::{self, escape};
use crate::timeline::{TimeUnit, Timeline};

/// A small table of figures (a simulation's metrics per policy).
#[derive(Debug, Clone, Default)]
pub struct Figures {
    pub caption: String,
    pub head: Vec<String>,
    pub rows: Vec<Vec<String>>,
}

/// One timeline with its heading.
#[derive(Debug, Clone)]
pub struct Section {
    pub title: String,
    pub timeline: Timeline,
}

/// A whole report.
#[derive(Debug, Clone, Default)]
pub struct Page {
    pub title: String,
    /// Label and value pairs shown at the top.
    pub summary: Vec<(String, String)>,
    pub figures: Vec<Figures>,
    pub sections: Vec<Section>,
}

const STYLE: &str = r#"
:root { --succeeded:#4477aa; --failed:#cc3311; --timeout:#ee7733; --cancelled:#999999;
  --retried:#ee3377; --running:#33bbee; --skipped:#aa3377; --ink:#222; --muted:#666; }
body { font: 14px/1.4 system-ui, sans-serif; color: var(--ink); margin: 1.5em auto; max-width: 1240px; padding: 0 1em; }
h1 { font-size: 1.4em; margin-bottom: .2em; } h2 { font-size: 1.15em; margin-top: 1.6em; }
dl.summary { display: grid; grid-template-columns: max-content 1fr; gap: .15em 1em; }
dl.summary dt { color: var(--muted); } dl.summary dd { margin: 0; }
.legend span { display: inline-block; margin-right: 1em; }
.legend i { display: inline-block; width: .9em; height: .9em; margin-right: .3em; vertical-align: -1px; }
svg { display: block; max-width: 100%; height: auto; }
svg text { font: 10px system-ui, sans-serif; fill: var(--muted); }
.lane-label { text-anchor: end; } .tick-label { text-anchor: middle; }
.lane { fill: #f4f4f4; } .axis, .tick, .grid { stroke: #bbb; stroke-width: 1; }
.bar { stroke: none; } .bar.highlight { stroke: #000; stroke-width: 2; }
.group { fill: none; stroke: #555; stroke-dasharray: 4 3; stroke-width: 1; }
.succeeded { fill: var(--succeeded); } .failed { fill: var(--failed); } .timeout { fill: var(--timeout); }
.cancelled { fill: var(--cancelled); } .retried { fill: var(--retried); } .running { fill: var(--running); }
.skipped { fill: var(--skipped); }
.strip { fill: var(--succeeded); } .o1 { opacity: .25; } .o2 { opacity: .5; } .o3 { opacity: .75; } .o4 { opacity: 1; }
.use-cores { fill: var(--succeeded); opacity: .7; } .use-gpus { fill: none; stroke: var(--timeout); stroke-width: 2; }
table { border-collapse: collapse; margin-top: .5em; }
th, td { padding: .2em .6em; text-align: left; border-bottom: 1px solid #e4e4e4; white-space: nowrap; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
table.tasks th { cursor: pointer; user-select: none; background: #fafafa; position: sticky; top: 0; }
table.tasks th[aria-sort=ascending]::after { content: " ▲"; } table.tasks th[aria-sort=descending]::after { content: " ▼"; }
td.state { font-weight: 600; } tr.failed td.state { color: var(--failed); } tr.timeout td.state { color: var(--timeout); }
tr.skipped td.state { color: var(--skipped); } tr.cancelled td.state { color: var(--muted); }
tr.selected { background: #fff3c4; }
.controls { margin: .6em 0; } .controls input { padding: .2em .4em; } .note { color: var(--muted); }
"#;

/// Sorts, filters and pages each task table from its JSON rows:
/// `[id, state, start, duration, detail, attempts, source]`.
const SCRIPT: &str = r#"
"use strict";
for (const table of document.querySelectorAll("table.tasks")) {
  const rows = JSON.parse(document.getElementById(table.dataset.rows).textContent);
  const unit = Number(table.dataset.unit);
  const body = table.querySelector("tbody");
  const section = table.closest("section");
  const filter = section.querySelector("input.filter");
  const more = section.querySelector("button.more");
  const shown = section.querySelector(".shown");
  let key = 2, dir = 1, limit = 500, view = rows;
  const fmt = (ms) => {
    if (ms === null) return "";
    const s = ms * unit / 1000;
    if (s < 60) return s.toFixed(s < 10 ? 3 : 1) + " s";
    const m = Math.floor(s / 60), h = Math.floor(m / 60);
    return h > 0 ? `${h} h ${m % 60} m` : `${m} m ${Math.round(s % 60)} s`;
  };
  const cell = (text, cls) => { const td = document.createElement("td"); td.textContent = text; if (cls) td.className = cls; return td; };
  const render = () => {
    const frag = document.createDocumentFragment();
    for (const r of view.slice(0, limit)) {
      const tr = document.createElement("tr");
      tr.className = r[1];
      tr.dataset.task = r[0];
      tr.append(cell(r[0]), cell(r[1], "state"), cell(fmt(r[2]), "num"), cell(fmt(r[3]), "num"),
                cell(r[4]), cell(String(r[5]), "num"), cell(r[6]));
      frag.append(tr);
    }
    body.replaceChildren(frag);
    shown.textContent = `${Math.min(limit, view.length)} of ${view.length} tasks shown`;
    more.hidden = view.length <= limit;
  };
  const apply = () => {
    const q = filter.value.trim().toLowerCase();
    view = q ? rows.filter(r => r[0].toLowerCase().includes(q) || r[1].includes(q) || String(r[6]).toLowerCase().includes(q)) : rows.slice();
    view.sort((a, b) => {
      const x = a[key], y = b[key];
      if (x === y) return 0;
      if (x === null) return 1;
      if (y === null) return -1;
      return (x < y ? -1 : 1) * dir;
    });
    render();
  };
  table.querySelectorAll("th").forEach((th, i) => th.addEventListener("click", () => {
    dir = key === i ? -dir : 1;
    key = i;
    table.querySelectorAll("th").forEach(h => h.removeAttribute("aria-sort"));
    th.setAttribute("aria-sort", dir > 0 ? "ascending" : "descending");
    apply();
  }));
  filter.addEventListener("input", () => { limit = 500; apply(); });
  more.addEventListener("click", () => { limit += 5000; render(); });
  body.addEventListener("click", (e) => {
    const tr = e.target.closest("tr");
    if (!tr) return;
    body.querySelectorAll("tr.selected").forEach(r => r.classList.remove("selected"));
    section.querySelectorAll(".bar.highlight").forEach(b => b.classList.remove("highlight"));
    tr.classList.add("selected");
    section.querySelectorAll(`.bar[data-task="${CSS.escape(tr.dataset.task)}"]`).forEach(b => b.classList.add("highlight"));
  });
  table.querySelectorAll("th")[2].setAttribute("aria-sort", "ascending");
  apply();
}
"#;

impl Page {
    /// The whole HTML document.
    pub fn render(&self) -> String {
        let rows: usize = self.sections.iter().map(|s| s.timeline.tasks.len()).sum();
        let mut html = String::with_capacity(4096 + rows * 160);
        let _ = write!(
            html,
            "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
             <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
             <meta name=\"generator\" content=\"slurp {}\"><title>{}</title><style>{STYLE}</style></head><body>\n",
            env!("CARGO_PKG_VERSION"),
            escape(&self.title)
        );
        let _ = write!(
            html,
            "<h1>{}</h1>\n<dl class=\"summary\">",
            escape(&self.title)
        );
        for (label, value) in &self.summary {
            let _ = write!(html, "<dt>{}</dt><dd>{}</dd>", escape(label), escape(value));
        }
        html.push_str("</dl>\n");
        for figures in &self.figures {
            figures_table(&mut html, figures);
        }
        for (n, section) in self.sections.iter().enumerate() {
            self.section(&mut html, n, section);
        }
        let _ = write!(html, "<script>{SCRIPT}</script>\n</body></html>\n");
        html
    }

    fn section(&self, html: &mut String, n: usize, section: &Section) {
        let timeline = &section.timeline;
        let _ = write!(html, "<section id=\"s{n}\">");
        if !section.title.is_empty() {
            let _ = write!(html, "<h2>{}</h2>", escape(&section.title));
        }
        html.push_str("<div class=\"legend\">");
        for (class, label) in [
            ("succeeded", "succeeded"),
            ("failed", "failed"),
            ("timeout", "timeout"),
            ("retried", "attempt retried"),
            ("cancelled", "cancelled"),
            ("running", "running"),
            ("skipped", "skipped (▲ never ran)"),
        ] {
            let _ = write!(
                html,
                "<span><i class=\"{class}\" style=\"background:var(--{class})\"></i>{label}</span>"
            );
        }
        html.push_str(
            "<span><i style=\"border:1px dashed #555\"></i>nested instance</span></div>\n",
        );
        let bars = gantt::bar_count(timeline);
        if bars > gantt::MAX_BARS {
            let _ = write!(
                html,
                "<p class=\"note\">{bars} bars are too many to draw one by one: each lane is shaded by how busy it was; attempts that did not succeed are drawn on top.</p>"
            );
        }
        html.push_str(&gantt::gantt(timeline));
        html.push_str("<h3>Utilisation</h3>");
        if timeline.lanes.iter().any(|l| l.gpu) {
            html.push_str("<div class=\"legend\"><span><i style=\"background:var(--succeeded);opacity:.7\"></i>busy cores</span><span><i style=\"border-top:2px solid var(--timeout)\"></i>busy GPUs</span></div>");
        }
        html.push_str(&gantt::utilisation(timeline));
        let _ = write!(
            html,
            "<h3>Tasks</h3><div class=\"controls\"><input class=\"filter\" type=\"search\" placeholder=\"filter by id, state or source\" aria-label=\"filter tasks\"> <span class=\"shown note\"></span> <button class=\"more\" hidden>show more</button></div>\
             <table class=\"tasks\" data-rows=\"rows{n}\" data-unit=\"{}\"><thead><tr><th>task</th><th>state</th><th class=\"num\">start</th><th class=\"num\">duration</th><th>exit</th><th class=\"num\">attempts</th><th>source</th></tr></thead><tbody></tbody></table>",
            match timeline.unit {
                TimeUnit::Millis => 1,
                TimeUnit::Seconds => 1000,
            }
        );
        let _ = write!(html, "<script type=\"application/json\" id=\"rows{n}\">");
        rows_json(html, timeline);
        html.push_str("</script></section>\n");
    }
}

/// The task table's rows as JSON, safe inside a `<script>` element.
fn rows_json(html: &mut String, timeline: &Timeline) {
    html.push('[');
    for (i, task) in timeline.tasks.iter().enumerate() {
        if i > 0 {
            html.push(',');
        }
        let first = task.attempts.first().map(|a| a.start);
        let duration: Option<u64> = (!task.attempts.is_empty())
            .then(|| task.attempts.iter().map(|a| a.end - a.start).sum());
        let row = serde_json::json!([
            task.id,
            task.state.map_or("unknown", |s| s.name()),
            first,
            duration,
            task.detail,
            task.attempts.len(),
            task.src,
        ]);
        // `</script>` inside a string would end the element.
        html.push_str(&row.to_string().replace("</", "<\\/"));
    }
    html.push(']');
}

fn figures_table(html: &mut String, figures: &Figures) {
    let _ = write!(
        html,
        "<h2>{}</h2><table class=\"figures\"><thead><tr>",
        escape(&figures.caption)
    );
    for (i, h) in figures.head.iter().enumerate() {
        let _ = write!(
            html,
            "<th{}>{}</th>",
            if i > 0 { " class=\"num\"" } else { "" },
            escape(h)
        );
    }
    html.push_str("</tr></thead><tbody>");
    for row in &figures.rows {
        html.push_str("<tr>");
        for (i, c) in row.iter().enumerate() {
            let _ = write!(
                html,
                "<td{}>{}</td>",
                if i > 0 { " class=\"num\"" } else { "" },
                escape(c)
            );
        }
        html.push_str("</tr>");
    }
    html.push_str("</tbody></table>\n");
}
