//! The docs' relative links lead somewhere: every `[text](path#anchor)` in
//! the repository's Markdown names a file that exists and, in a Markdown
//! file, a heading it has (as GitHub makes a heading's anchor). README and
//! the docs point into BENCHMARKS.md and the model card by heading; a
//! renamed heading would otherwise leave a reader at the top of a
//! thousand-line file.

mod common;
use std::collections::HashSet;
use std::path::{Path, PathBuf};

use common::repo;

/// The Markdown files of the checkout, outside build output and hidden
/// folders.
fn markdown(root: &Path) -> Vec<PathBuf> {
    common::files_under(
        root,
        &|d| {
            let name = d.file_name().unwrap_or_default().to_string_lossy();
            name.starts_with('.') || name == "target" || name == "node_modules"
        },
        &|f| f.extension().is_some_and(|e| e == "md"),
    )
}

/// The lines of `text` outside fenced code blocks.
fn prose(text: &str) -> impl Iterator<Item = &str> {
    let mut fenced = false;
    text.lines().filter(move |l| {
        if l.trim_start().starts_with("```") {
            fenced = !fenced;
            return false;
        }
        !fenced
    })
}

/// GitHub's anchor of a heading: lower case, punctuation dropped (letters
/// of any script, digits, `-` and `_` kept), spaces as hyphens; a repeated
/// heading gets `-1`, `-2`, …
fn anchors(text: &str) -> HashSet<String> {
    let mut seen: HashSet<String> = HashSet::new();
    let mut out = HashSet::new();
    for line in prose(text) {
        let Some(title) = line.strip_prefix('#') else {
            continue;
        };
        let title = title.trim_start_matches('#');
        if !title.starts_with(' ') {
            continue;
        }
        let slug: String = title
            .trim()
            .to_lowercase()
            .chars()
            .filter(|c| c.is_alphanumeric() || matches!(c, '-' | '_' | ' '))
            .map(|c| if c == ' ' { '-' } else { c })
            .collect();
        let mut anchor = slug.clone();
        let mut n = 0;
        while !seen.insert(anchor.clone()) {
            n += 1;
            anchor = format!("{slug}-{n}");
        }
        out.insert(anchor);
    }
    out
}

/// The targets of `text`'s inline links, `](target)`.
fn links(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for line in prose(text) {
        let mut rest = line;
        while let Some(at) = rest.find("](") {
            rest = &rest[at + 2..];
            let end = rest.find([')', ' ']).unwrap_or(rest.len());
            out.push(rest[..end].to_string());
            rest = &rest[end..];
        }
    }
    out
}

#[test]
fn the_anchors_are_githubs() {
    let got = anchors(
        "# slurp\n## Two commands\n```\n# not a heading\n```\n\
         ## fair-v5: a network of its own for `+easy` (issue 17, 2026-12-04)\n\
         ### Two commands\n#hashtag\n## Ratios × and ≤ bounds\n",
    );
    let want = [
        "slurp",
        "two-commands",
        "fair-v5-a-network-of-its-own-for-easy-issue-17-2026-12-04",
        "two-commands-1",
        "ratios--and--bounds",
    ];
    assert_eq!(got, want.iter().map(|s| s.to_string()).collect());
    assert_eq!(
        links("see [a](docs/a.md#x) and [b](https://e.org) `x](y` [c](c.md \"t\")"),
        ["docs/a.md#x", "https://e.org", "y`", "c.md"]
    );
}

#[test]
fn every_relative_link_in_the_docs_leads_to_a_file_and_a_heading_that_exist() {
    let root = repo();
    let files = markdown(&root);
    assert!(
        files.iter().any(|f| f.ends_with("README.md")) && files.len() > 5,
        "{files:?}"
    );
    let mut broken = Vec::new();
    let mut checked = 0;
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        for link in links(&text) {
            if link.contains("://") || link.starts_with("mailto:") || link.contains('`') {
                continue;
            }
            let (path, anchor) = link.split_once('#').unwrap_or((&link, ""));
            let target = if path.is_empty() {
                file.clone()
            } else {
                file.parent().unwrap().join(path)
            };
            let shown = file.strip_prefix(&root).unwrap().display();
            if !target.exists() {
                broken.push(format!("{shown}: {link} (no such file)"));
                continue;
            }
            if !anchor.is_empty() && target.extension().is_some_and(|e| e == "md") {
                let there = std::fs::read_to_string(&target).unwrap();
                if !anchors(&there).contains(anchor) {
                    broken.push(format!("{shown}: {link} (no such heading)"));
                    continue;
                }
            }
            checked += 1;
        }
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
    assert!(checked > 50, "only {checked} links checked");
}
