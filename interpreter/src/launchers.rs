//! Launchers: `launcher=NAME` wraps a task's command for an outside
//! launcher (`mpirun -np {ntasks}`, `srun`, `flux run` …), defined as data.
//!
//! A launcher is a TOML file `NAME.toml`: `command`, the words put before
//! the task's command, and `when`, words added only when the task sets that
//! resource; both may use `{ntasks}`, `{cores}`, `{gpus}`, `{nodes}`,
//! `{mem_k}` (KiB per copy) and `{mem_per_core_k}`. The first found wins,
//! so a user's file overrides the site's, which overrides slurp's:
//!
//! 1. each directory of `$SLURP_LAUNCHERS` (colon-separated), then
//!    `$XDG_CONFIG_HOME/slurp/launchers` (`~/.config/slurp/launchers`);
//! 2. the site's, `/etc/slurp/launchers`;
//! 3. slurp's own, `stdlib/launchers/` (built into the binary).

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::Deserialize;
use slurp_runtime::LaunchWith;

/// slurp's own launchers, as shipped in `stdlib/launchers/`.
pub const STDLIB: &[(&str, &str)] = &[
    ("mpirun", include_str!("../../stdlib/launchers/mpirun.toml")),
    (
        "mpiexec",
        include_str!("../../stdlib/launchers/mpiexec.toml"),
    ),
    (
        "mpiexec.hydra",
        include_str!("../../stdlib/launchers/mpiexec.hydra.toml"),
    ),
    ("srun", include_str!("../../stdlib/launchers/srun.toml")),
    (
        "flux-run",
        include_str!("../../stdlib/launchers/flux-run.toml"),
    ),
];

/// The placeholders a launcher's words may use.
pub const PLACEHOLDERS: &[&str] = &[
    "ntasks",
    "cores",
    "gpus",
    "nodes",
    "mem_k",
    "mem_per_core_k",
];

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    #[allow(dead_code)]
    description: Option<String>,
    command: Vec<String>,
    #[serde(default)]
    when: BTreeMap<String, Vec<String>>,
}

/// Where user and site launchers are looked for, first first.
fn directories() -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::env::var_os("SLURP_LAUNCHERS")
        .map(|v| std::env::split_paths(&v).collect())
        .unwrap_or_default();
    let config = std::env::var_os("XDG_CONFIG_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".config")));
    if let Some(config) = config {
        dirs.push(config.join("slurp/launchers"));
    }
    dirs.push(PathBuf::from("/etc/slurp/launchers"));
    dirs
}

/// The launcher `name`, from the first place that defines it; or why not.
pub fn find(name: &str) -> Result<LaunchWith, String> {
    let valid = !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
        && !name.starts_with('.');
    if !valid {
        return Err(format!("`{name}` is not a launcher name"));
    }
    for dir in directories() {
        let path = dir.join(format!("{name}.toml"));
        if let Ok(text) = std::fs::read_to_string(&path) {
            return parse(name, &text).map_err(|e| format!("{}: {e}", path.display()));
        }
    }
    match STDLIB.iter().find(|(n, _)| *n == name) {
        Some((_, text)) => parse(name, text),
        None => Err(format!("no launcher `{name}`")),
    }
}

/// Every launcher's name, slurp's and the user's and site's.
pub fn names() -> Vec<String> {
    let mut names: Vec<String> = STDLIB.iter().map(|(n, _)| n.to_string()).collect();
    for dir in directories() {
        for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.extension().is_some_and(|e| e == "toml")
                && let Some(stem) = path.file_stem().and_then(|s| s.to_str())
            {
                names.push(stem.to_owned());
            }
        }
    }
    names.sort();
    names.dedup();
    names
}

/// A launcher file's text, checked.
pub fn parse(name: &str, text: &str) -> Result<LaunchWith, String> {
    let file: File = toml::from_str(text).map_err(|e| e.message().to_owned())?;
    if file.command.is_empty() {
        return Err("`command` has no words".to_owned());
    }
    let check = |word: &str| -> Result<(), String> {
        let mut rest = word;
        while let Some(open) = rest.find('{') {
            let close = rest[open..]
                .find('}')
                .ok_or_else(|| format!("`{word}` has a `{{` without `}}`"))?;
            let key = &rest[open + 1..open + close];
            if !PLACEHOLDERS.contains(&key) {
                return Err(format!(
                    "`{{{key}}}` in `{word}` is not a placeholder (they are {})",
                    PLACEHOLDERS.join(", ")
                ));
            }
            rest = &rest[open + close + 1..];
        }
        Ok(())
    };
    for word in file.command.iter().chain(file.when.values().flatten()) {
        check(word)?;
    }
    for key in file.when.keys() {
        if !["nodes", "gpus", "mem"].contains(&key.as_str()) {
            return Err(format!(
                "`when.{key}`: words may depend on `nodes`, `gpus` or `mem`"
            ));
        }
    }
    Ok(LaunchWith {
        name: name.into(),
        command: file.command.into_iter().map(Into::into).collect(),
        when: file
            .when
            .into_iter()
            .map(|(k, words)| (k.into(), words.into_iter().map(Into::into).collect()))
            .collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every file of `stdlib/launchers/` is built in, and parses.
    #[test]
    fn every_stdlib_launcher_is_built_in_and_valid() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../stdlib/launchers");
        let mut on_disk: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .flatten()
            .filter_map(|e| {
                let p = e.path();
                (p.extension()? == "toml").then(|| p.file_stem()?.to_str().map(str::to_owned))?
            })
            .collect();
        on_disk.sort();
        let mut built_in: Vec<String> = STDLIB.iter().map(|(n, _)| n.to_string()).collect();
        built_in.sort();
        assert_eq!(on_disk, built_in);
        for (name, text) in STDLIB {
            parse(name, text).unwrap_or_else(|e| panic!("{name}: {e}"));
        }
    }

    #[test]
    fn a_bad_launcher_file_says_what_is_wrong() {
        assert!(parse("x", "command = []").unwrap_err().contains("no words"));
        assert!(
            parse("x", "command = [\"run\", \"{ranks}\"]")
                .unwrap_err()
                .contains("`{ranks}`")
        );
        assert!(parse("x", "comand = [\"a\"]").is_err());
        assert!(
            parse("x", "command = [\"a\"]\n[when]\ntime = [\"-t\"]")
                .unwrap_err()
                .contains("when.time")
        );
        assert!(find("../etc/passwd").is_err());
    }
}
