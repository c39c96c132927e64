//! A GNU parallel command line → the same checked [`Program`] a file gives.
//!
//! `slurp [OPTIONS] -- COMMAND ARGS ::: A B ::: X Y` is one template. Its
//! command is the words joined by spaces and read as one line of a file
//! would be — exec'd unless it has shell syntax — as parallel joins its
//! words for the shell; its placeholders are parallel's replacement strings
//! (`{}`, `{.}`, `{/}`, `{//}`, `{/.}`, `{N}` and `{N.}`…, `{#}`, `{%}`),
//! and a command with none gets ` {}` appended, as parallel does. Its sweep
//! is the input sources: each `:::` (values), `::::` (lines of a file, `-`
//! for standard input) is crossed with the ones before it, first varying
//! slowest; a `:::+`/`::::+` source is linked to the one before it, row by
//! row, as long as the shorter. Substituted values are quoted for the shell
//! in a shell line and are one argv word otherwise, as in a task line.
//!
//! Tasks are named by the program and their values (`gzip[a.csv]`). The
//! run's source, kept in its journal, is the command as it was read.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use slurp_grammar::{Diagnostic, Span};
use slurp_runtime::{
    Axis, CommandTemplate, LineKind, Piece, Program, Request, Source, Task, Template, TemplateId,
    Values, Workflow,
};

use crate::lower::{Dialect, ShellQuotes, compile};
use crate::report::{Failure, Located, Sources};
use crate::{Loaded, Notes, Options};

/// A command line as the user gave it.
#[derive(Debug, Clone)]
pub struct Invocation {
    /// The command's words, joined by spaces and read as one line.
    pub command: Vec<String>,
    /// The input sources, in order; none means standard input.
    pub sources: Vec<Input>,
}

/// One input source.
#[derive(Debug, Clone)]
pub struct Input {
    pub values: InputValues,
    /// Linked (`:::+`, `::::+`) to the source before it, not crossed.
    pub linked: bool,
}

#[derive(Debug, Clone)]
pub enum InputValues {
    /// `::: A B C`
    Given(Vec<String>),
    /// `:::: FILE` or `-a FILE`: one value per line; `-` is standard input.
    Lines(PathBuf),
}

/// What the display of the command line's source is.
pub const COMMAND_LINE: &str = "command line";

/// Checks and lowers a command line; every mistake at once, as for a file.
pub fn command_line(invocation: &Invocation, opts: &Options) -> Result<Loaded, Failure> {
    let mut sources = Sources::default();
    let mut diags = Vec::new();
    let mut text = invocation.command.join(" ");
    let failed = |diags, sources: &Sources| {
        Err(Failure::new(
            "the command line is not a valid run".to_owned(),
            diags,
            sources,
        ))
    };
    if text.trim().is_empty() {
        diags.push(Located {
            file: None,
            diagnostic: Diagnostic::new("slurp::syntax", "no command to run")
                .help("give a command after `--`: `slurp -- gzip {} ::: *.csv`"),
        });
        return failed(diags, &sources);
    }

    // The columns: every source's values, read now.
    let inputs: Vec<Input> = if invocation.sources.is_empty() {
        vec![Input {
            values: InputValues::Lines(PathBuf::from("-")),
            linked: false,
        }]
    } else {
        invocation.sources.clone()
    };
    let mut columns: Vec<(Vec<Box<str>>, bool)> = Vec::new();
    for input in &inputs {
        let values = match &input.values {
            InputValues::Given(values) => values.iter().map(|v| v.as_str().into()).collect(),
            InputValues::Lines(path) => match read_lines(path, &opts.cwd) {
                Ok(values) => values,
                Err(diagnostic) => {
                    diags.push(Located {
                        file: None,
                        diagnostic,
                    });
                    Vec::new()
                }
            },
        };
        columns.push((values, input.linked && !columns.is_empty()));
    }
    let width = columns.len() as u16;

    // The command, with ` {}` when it names no value.
    let probe = compile(
        &text,
        Span::new(0, text.len()),
        Dialect::Parallel { columns: width },
        None,
    );
    if probe.is_ok_and(|t| {
        !t.0.iter()
            .any(|p| matches!(p, Piece::Var(_) | Piece::Index | Piece::JobSlot))
    }) {
        text.push_str(" {}");
    }
    let file = sources.add(
        PathBuf::from(COMMAND_LINE),
        COMMAND_LINE.to_owned(),
        Arc::from(text.as_str()),
    );
    let located = |diagnostic| Located {
        file: Some(file),
        diagnostic,
    };
    let command = match slurp_grammar::parse_command(&text) {
        Ok(command) => Some(command),
        Err(found) => {
            diags.extend(found.into_iter().map(located));
            None
        }
    };
    let mut notes = Notes::default();
    let template = command.map(|command| {
        let dialect = Dialect::Parallel { columns: width };
        let mut words = Vec::new();
        if let Some(reason) = &command.shell {
            let shell = command.shell_text(&text);
            match compile(
                &shell,
                command.span,
                dialect,
                Some(&mut ShellQuotes::default()),
            ) {
                Ok(t) => words.push(t),
                Err(d) => diags.push(located(d)),
            }
            notes.shell_lines.push((
                file,
                1,
                format!("{}; values quoted for the shell", reason.what),
            ));
        } else {
            for word in &command.words {
                // `{}` as a word of its own is one argv word per source,
                // as the shell would split parallel's line.
                let all = matches!(
                    word.text.strip_prefix('{').and_then(|w| w.strip_suffix('}')),
                    Some(inner) if slurp_runtime::Edit::from_suffix(inner).is_some()
                );
                if all && width > 1 {
                    let edit = &word.text[1..word.text.len() - 1];
                    for column in 1..=width {
                        match compile(&format!("{{{column}{edit}}}"), word.span, dialect, None) {
                            Ok(t) => words.push(t),
                            Err(d) => diags.push(located(d)),
                        }
                    }
                    continue;
                }
                match compile(&word.text, word.span, dialect, None) {
                    Ok(t) => words.push(t),
                    Err(d) => diags.push(located(d)),
                }
            }
        }
        let program = command
            .words
            .first()
            .map(|w| Path::new(&w.text))
            .and_then(Path::file_name)
            .map(|n| n.to_string_lossy().into_owned())
            .filter(|n| slurp_grammar::is_identifier(n))
            .unwrap_or_else(|| "cmd".to_owned());
        (
            program,
            CommandTemplate::new(words, command.shell.is_some()),
        )
    });

    // The sweep: crossed groups of linked columns.
    let mut sweep: Vec<Axis> = Vec::new();
    let mut group: Vec<Vec<Box<str>>> = Vec::new();
    let close = |group: &mut Vec<Vec<Box<str>>>, sweep: &mut Vec<Axis>| {
        let first = sweep.iter().map(|a| a.values.width()).sum::<u16>() + 1;
        let values = match group.len() {
            0 => return,
            1 => Values::List(group.pop().unwrap_or_default()),
            width => {
                let rows = group.iter().map(Vec::len).min().unwrap_or(0);
                let mut cells = Vec::with_capacity(rows * width);
                for row in 0..rows {
                    for column in group.iter() {
                        cells.push(column[row].clone());
                    }
                }
                Values::Table {
                    width: width as u16,
                    cells,
                }
            }
        };
        let last = first + values.width() - 1;
        sweep.push(Axis {
            name: if first == last {
                first.to_string().into()
            } else {
                format!("{first}-{last}").into()
            },
            values,
        });
        group.clear();
    };
    for (values, linked) in columns {
        if !linked {
            close(&mut group, &mut sweep);
        }
        group.push(values);
    }
    close(&mut group, &mut sweep);

    let count = sweep
        .iter()
        .fold(1u128, |n, a| n * u128::from(a.values.len()));
    let limit = opts.max_tasks.min(u64::from(u32::MAX));
    if count > u128::from(limit) {
        diags.push(Located {
            file: Some(file),
            diagnostic: Diagnostic::new(
                "slurp::sweep_too_large",
                format!("the input sources make {count} tasks, over the limit of {limit}"),
            )
            .label(
                Span::new(0, text.len()),
                "run once per combination of values",
            )
            .help("split the input, or raise the limit with `--max-tasks`"),
        });
    }
    let Some((name, command)) = template.filter(|_| diags.is_empty()) else {
        return failed(diags, &sources);
    };
    let mut workflow = Workflow::new(file);
    workflow.templates.push(Template {
        name: Some(name.into()),
        kind: LineKind::Command,
        source: Source {
            file,
            line: 1,
            start: 0,
            end: text.len() as u32,
        },
        sweep,
        command,
        extras: None,
    });
    let task = Task {
        template: TemplateId(0),
        index: 0,
        request: Request::default(),
        time_limit: None,
        retries: 0,
        nested: None,
    };
    workflow.tasks.push_members(task, count as u32);
    let program = Program {
        workflows: vec![workflow],
        files: vec![PathBuf::from(COMMAND_LINE)],
    };
    Ok(Loaded {
        program,
        sources,
        notes,
    })
}

/// The lines of `path` (`-`: standard input), each a value: an empty line
/// is an empty value, a last line without `\n` counts, nothing is trimmed.
pub(crate) fn read_lines(path: &Path, cwd: &Path) -> Result<Vec<Box<str>>, Diagnostic> {
    let stdin = path == Path::new("-");
    let shown = if stdin {
        "standard input".to_owned()
    } else {
        format!("`{}`", path.display())
    };
    let bytes = if stdin {
        let mut bytes = Vec::new();
        std::io::Read::read_to_end(&mut std::io::stdin().lock(), &mut bytes).map(|_| bytes)
    } else {
        std::fs::read(cwd.join(path))
    };
    let bytes = bytes.map_err(|e| {
        Diagnostic::new(
            "slurp::unreadable",
            format!("cannot read the values in {shown}: {e}"),
        )
        .help("values come one per line of a file; `-` is standard input")
    })?;
    let text = String::from_utf8(bytes).map_err(|e| {
        let line = e.as_bytes()[..e.utf8_error().valid_up_to()]
            .iter()
            .filter(|&&b| b == b'\n')
            .count()
            + 1;
        Diagnostic::new(
            "slurp::not_utf8",
            format!("line {line} of the values in {shown} is not UTF-8 text"),
        )
        .help(
            "slurp's values are text; rename such files, or list them with `find -print0 | iconv`",
        )
    })?;
    let body = text.strip_suffix('\n').unwrap_or(&text);
    if body.is_empty() && text.is_empty() {
        return Ok(Vec::new());
    }
    Ok(body.split('\n').map(Box::from).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(command: &[&str], sources: Vec<Input>) -> Result<Loaded, Failure> {
        let opts = Options {
            capacity: slurp_runtime::Capacity {
                nodes: 1,
                cores_per_node: 2,
                gpus_per_node: 0,
                mem_per_node: 1 << 30,
            },
            max_tasks: 1000,
            cwd: std::env::temp_dir(),
        };
        command_line(
            &Invocation {
                command: command.iter().map(|s| s.to_string()).collect(),
                sources,
            },
            &opts,
        )
    }

    fn given(values: &[&str], linked: bool) -> Input {
        Input {
            values: InputValues::Given(values.iter().map(|s| s.to_string()).collect()),
            linked,
        }
    }

    fn argvs(loaded: &Loaded) -> Vec<Vec<String>> {
        let root = loaded.program.root();
        root.task_ids().map(|t| root.argv(t)).collect()
    }

    #[test]
    fn sources_cross_first_slowest_and_linked_ones_go_row_by_row() {
        let crossed = run(
            &["echo"],
            vec![given(&["a", "b"], false), given(&["1", "2"], false)],
        );
        let argv = argvs(&crossed.unwrap());
        assert_eq!(
            argv,
            [
                ["echo", "a", "1"],
                ["echo", "a", "2"],
                ["echo", "b", "1"],
                ["echo", "b", "2"]
            ]
        );
        let linked = run(
            &["echo", "{2}-{1}"],
            vec![given(&["a", "b", "c"], false), given(&["1", "2"], true)],
        );
        assert_eq!(argvs(&linked.unwrap()), [["echo", "1-a"], ["echo", "2-b"]]);
    }

    #[test]
    fn replacement_strings_edit_paths_as_parallel_does() {
        let loaded = run(
            &["echo", "{.}", "{/}", "{//}", "{/.}", "{#}"],
            vec![given(&["/a/b.c", "d.e.f", ".bashrc", "a/"], false)],
        )
        .unwrap();
        assert_eq!(
            argvs(&loaded),
            [
                ["echo", "/a/b", "b.c", "/a", "b", "1"],
                ["echo", "d.e", "d.e.f", ".", "d.e", "2"],
                ["echo", "", ".bashrc", ".", "", "3"],
                ["echo", "a/", "", ".", "", "4"],
            ]
        );
    }

    #[test]
    fn a_shell_line_quotes_each_value_and_an_exec_line_keeps_it_one_word() {
        let hostile = "a;b $(touch x) 'q'";
        let shell = run(&["echo", "{}", ">", "out"], vec![given(&[hostile], false)]).unwrap();
        assert_eq!(
            argvs(&shell),
            [["/bin/sh", "-c", "echo 'a;b $(touch x) '\\''q'\\''' > out"]]
        );
        let exec = run(&["printf", "%s"], vec![given(&[hostile], false)]).unwrap();
        assert_eq!(argvs(&exec), [["printf", "%s", hostile]]);
    }

    #[test]
    fn a_command_without_a_replacement_string_gets_every_value_appended() {
        let loaded = run(
            &["echo", "x"],
            vec![given(&["a"], false), given(&["b"], false)],
        )
        .unwrap();
        assert_eq!(argvs(&loaded), [["echo", "x", "a", "b"]]);
        let root = loaded.program.root();
        assert_eq!(root.task_name(slurp_runtime::TaskId(0)), "echo[a,b]");
    }

    #[test]
    fn a_source_number_past_the_sources_is_a_diagnostic_at_it() {
        let failure = run(
            &["echo", "{3}"],
            vec![given(&["a"], false), given(&["b"], false)],
        )
        .expect_err("refused");
        let text = format!("{:?}", failure.problems);
        assert!(text.contains("input source 3"), "{text}");
        assert!(text.contains("there are 2 input sources"), "{text}");
    }

    #[test]
    fn lines_keep_empty_values_and_a_last_line_without_newline() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("in");
        std::fs::write(&path, "a\n\nb c\nlast").unwrap();
        let values = read_lines(&path, dir.path()).unwrap();
        assert_eq!(
            &*values,
            ["a".into(), "".into(), "b c".into(), "last".into()] as [Box<str>; 4]
        );
        std::fs::write(&path, "").unwrap();
        assert!(read_lines(&path, dir.path()).unwrap().is_empty());
    }
}
