//! A task's environment: slurp's own, then the task's `env=`, then slurp's
//! variables (`SLURP_TASK_ID`, …), then each rank's (`SLURP_TASK_RANK`,
//! `SLURP_CORES`, …); a later one of the same name replaces an earlier.
//!
//! slurp's own environment is read and made into `KEY=VALUE` strings once
//! per run (slurp never changes it while it runs): making them again for
//! every task was a few per cent of a short task's launch.

use std::ffi::{CStr, CString};
use std::os::unix::ffi::OsStrExt as _;
use std::sync::OnceLock;

use super::Launch;

/// `KEY=VALUE`, and where its `=` is.
pub(super) struct Entry {
    text: CString,
    key: usize,
}

impl Entry {
    /// Refused, by name, when either holds a NUL byte.
    pub(super) fn new(key: &[u8], value: &[u8]) -> Result<Entry, String> {
        let mut text = Vec::with_capacity(key.len() + 1 + value.len());
        text.extend_from_slice(key);
        text.push(b'=');
        text.extend_from_slice(value);
        let text = CString::new(text).map_err(|_| {
            format!(
                "the environment variable `{}` contains a NUL byte",
                String::from_utf8_lossy(key)
            )
        })?;
        Ok(Entry {
            text,
            key: key.len(),
        })
    }

    fn key(&self) -> &[u8] {
        &self.text.as_bytes()[..self.key]
    }

    fn value(&self) -> &[u8] {
        &self.text.as_bytes()[self.key + 1..]
    }
}

fn inherited() -> &'static [Entry] {
    static INHERITED: OnceLock<Vec<Entry>> = OnceLock::new();
    INHERITED.get_or_init(|| {
        std::env::vars_os()
            // An inherited variable cannot hold a NUL byte.
            .filter_map(|(k, v)| Entry::new(k.as_bytes(), v.as_bytes()).ok())
            .collect()
    })
}

/// What one task sets on top of slurp's environment, and what it hides.
pub(super) struct Environ {
    set: Vec<Entry>,
    /// Inherited names the task does not see: an outer slurp's socket.
    hidden: &'static [&'static [u8]],
}

impl Environ {
    pub(super) fn for_task(launch: &Launch) -> Result<Environ, String> {
        let mut env = Environ {
            set: Vec::with_capacity(launch.env.len() + 8),
            // An outer slurp's socket is not this task's instance.
            hidden: match launch.socket {
                None => &[b"SLURP_SOCKET", b"SLURP_SCOPE"],
                Some(_) => &[],
            },
        };
        for (k, v) in &launch.env {
            env.set(k.as_bytes(), v.as_bytes())?;
        }
        env.set(b"SLURP_TASK_ID", launch.name.as_bytes())?;
        env.set(b"SLURP_NTASKS", launch.ranks.len().to_string().as_bytes())?;
        env.set(b"SLURP_RUN_DIR", launch.run_dir.as_os_str().as_bytes())?;
        env.set(b"SLURP_DEPTH", launch.depth.to_string().as_bytes())?;
        // A slurp started inside stops its own tasks within this grace.
        let grace = launch.grace.as_millis().to_string();
        env.set(b"SLURP_GRACE_MS", grace.as_bytes())?;
        if let Some(socket) = &launch.socket {
            env.set(b"SLURP_SOCKET", socket.as_os_str().as_bytes())?;
            env.set(b"SLURP_SCOPE", launch.scope.as_bytes())?;
        }
        if launch.mem > 0 {
            env.set(b"SLURP_MEM", launch.mem.to_string().as_bytes())?;
        }
        Ok(env)
    }

    fn set(&mut self, key: &[u8], value: &[u8]) -> Result<(), String> {
        self.set.retain(|e| e.key() != key);
        self.set.push(Entry::new(key, value)?);
        Ok(())
    }

    /// A rank's whole environment, its own variables `rank` last.
    pub(super) fn for_rank<'a>(&'a self, rank: &'a [Entry]) -> Vec<&'a CStr> {
        self.entries(rank).map(|e| e.text.as_c_str()).collect()
    }

    /// The task's environment as text (a jobspec's), without any rank's.
    pub(super) fn pairs(&self) -> Vec<(String, String)> {
        self.entries(&[])
            .map(|e| {
                (
                    String::from_utf8_lossy(e.key()).into_owned(),
                    String::from_utf8_lossy(e.value()).into_owned(),
                )
            })
            .collect()
    }

    /// Inherited (less what is hidden or set again), then the task's, then
    /// the rank's.
    fn entries<'a>(&'a self, rank: &'a [Entry]) -> impl Iterator<Item = &'a Entry> {
        let in_rank = |key: &[u8]| rank.iter().any(|r| r.key() == key);
        let inherited = inherited().iter().filter(move |e| {
            !self.hidden.contains(&e.key())
                && !self.set.iter().any(|s| s.key() == e.key())
                && !in_rank(e.key())
        });
        let set = self.set.iter().filter(move |e| !in_rank(e.key()));
        inherited.chain(set).chain(rank)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn launch() -> Launch {
        Launch {
            allocation: None,
            instance: 0,
            task: crate::ir::TaskId(0),
            attempt: 1,
            name: "t[3]".into(),
            argv: vec!["true".into()],
            env: vec![
                ("A".into(), "1".into()),
                ("SLURP_DEPTH".into(), "user's".into()),
                ("A".into(), "2".into()),
            ],
            cwd: "/".into(),
            ranks: vec![Default::default(), Default::default()],
            time_limit: None,
            mode: Default::default(),
            files: None,
            run_dir: "/tmp/run".into(),
            grace: std::time::Duration::from_secs(1),
            depth: 0,
            mem: 0,
            pmi: false,
            socket: None,
            scope: String::new(),
        }
    }

    fn text(env: &[&CStr]) -> Vec<String> {
        env.iter()
            .map(|e| e.to_string_lossy().into_owned())
            .collect()
    }

    #[test]
    fn later_settings_replace_earlier_and_a_rank_has_the_last_word() {
        let env = Environ::for_task(&launch()).unwrap();
        let rank = [
            Entry::new(b"SLURP_TASK_RANK", b"1").unwrap(),
            Entry::new(b"A", b"rank").unwrap(),
        ];
        let all = text(&env.for_rank(&rank));
        let named = |k: &str| {
            all.iter()
                .filter(|e| e.starts_with(&format!("{k}=")))
                .cloned()
                .collect::<Vec<_>>()
        };
        assert_eq!(named("A"), ["A=rank"]);
        assert_eq!(named("SLURP_DEPTH"), ["SLURP_DEPTH=0"]);
        assert_eq!(named("SLURP_TASK_ID"), ["SLURP_TASK_ID=t[3]"]);
        assert_eq!(named("SLURP_NTASKS"), ["SLURP_NTASKS=2"]);
        assert_eq!(all.last().map(String::as_str), Some("A=rank"));
        // Every inherited variable is there once, unless replaced.
        for (k, v) in std::env::vars() {
            if !k.starts_with("SLURP_") && k != "A" {
                assert_eq!(named(&k), [format!("{k}={v}")], "{k}");
            }
        }
        let pairs = env.pairs();
        assert!(pairs.contains(&("A".to_owned(), "2".to_owned())));
        assert!(!pairs.iter().any(|(k, _)| k == "SLURP_TASK_RANK"));
    }

    #[test]
    fn a_nul_byte_in_a_task_variable_is_refused_by_name() {
        let mut launch = launch();
        launch.env.push(("BAD".into(), "a\0b".into()));
        let error = Environ::for_task(&launch).err().unwrap();
        assert!(error.contains("`BAD`"), "{error}");
    }
}
