//! The TOML DAG spec: the line language's features as data.
//!
//! ```toml
//! [defaults]
//! cores = 2
//!
//! [[task]]
//! name = "sim"
//! sweep = { seed = "1..100" }
//! command = ["./sim", "--seed", "{seed}"]
//! after = ["prep"]
//! ```
//!
//! Each `[[task]]` becomes the same [`Entry`] a `task` line does, so every
//! check and the lowering are shared. Unknown fields are rejected (serde's
//! `deny_unknown_fields`), with the span toml reports.

use serde::Deserialize;
use slurp_grammar::{Attr, Command, Diagnostic, Span, Spanned, SweepValues, SweepVar, Word};
use slurp_runtime::FileId;
use toml::Spanned as TSpanned;

use crate::load::{Entry, EntryKind, SourcedAttr};
use crate::report::{Located, Sources};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SpecDef {
    #[serde(default)]
    defaults: Option<AttrsDef>,
    #[serde(default)]
    task: Vec<TaskDef>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AttrsDef {
    ntasks: Option<TSpanned<Scalar>>,
    cores: Option<TSpanned<Scalar>>,
    gpus: Option<TSpanned<Scalar>>,
    mem: Option<TSpanned<Scalar>>,
    nodes: Option<TSpanned<Scalar>>,
    time: Option<TSpanned<Scalar>>,
    env: Option<TSpanned<toml::Table>>,
    cwd: Option<TSpanned<String>>,
    retries: Option<TSpanned<Scalar>>,
    policy: Option<TSpanned<String>>,
    output: Option<TSpanned<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TaskDef {
    name: TSpanned<String>,
    #[serde(default)]
    command: Option<TSpanned<CommandDef>>,
    #[serde(default)]
    workflow: Option<TSpanned<String>>,
    #[serde(default)]
    sweep: Option<TSpanned<toml::Table>>,
    #[serde(default)]
    after: Option<TSpanned<AfterDef>>,
    // The attributes, listed again: serde's `flatten` would lose
    // `deny_unknown_fields` and the spans.
    ntasks: Option<TSpanned<Scalar>>,
    cores: Option<TSpanned<Scalar>>,
    gpus: Option<TSpanned<Scalar>>,
    mem: Option<TSpanned<Scalar>>,
    nodes: Option<TSpanned<Scalar>>,
    time: Option<TSpanned<Scalar>>,
    env: Option<TSpanned<toml::Table>>,
    cwd: Option<TSpanned<String>>,
    retries: Option<TSpanned<Scalar>>,
    policy: Option<TSpanned<String>>,
    output: Option<TSpanned<String>>,
}

impl TaskDef {
    fn take_attrs(&mut self) -> AttrsDef {
        AttrsDef {
            ntasks: self.ntasks.take(),
            cores: self.cores.take(),
            gpus: self.gpus.take(),
            mem: self.mem.take(),
            nodes: self.nodes.take(),
            time: self.time.take(),
            env: self.env.take(),
            cwd: self.cwd.take(),
            retries: self.retries.take(),
            policy: self.policy.take(),
            output: self.output.take(),
        }
    }
}

#[derive(Deserialize)]
#[serde(untagged)]
enum CommandDef {
    Argv(Vec<String>),
    Line(String),
}

#[derive(Deserialize)]
#[serde(untagged)]
enum AfterDef {
    List(Vec<String>),
    One(String),
}

#[derive(Deserialize)]
#[serde(untagged)]
enum Scalar {
    Int(i64),
    Text(String),
}

impl Scalar {
    fn text(&self) -> String {
        match self {
            Scalar::Int(n) => n.to_string(),
            Scalar::Text(s) => s.clone(),
        }
    }
}

fn span(range: std::ops::Range<usize>) -> Span {
    Span::new(range.start, range.end)
}

/// Parses a TOML spec into entries, reporting every mistake into `diags`.
pub(crate) fn entries(file: FileId, sources: &Sources, diags: &mut Vec<Located>) -> Vec<Entry> {
    let text = sources.get(file).text.clone();
    let spec: SpecDef = match toml::from_str(&text) {
        Ok(spec) => spec,
        Err(error) => {
            let message = error.message().trim().to_owned();
            let code = if message.starts_with("unknown field") {
                "slurp::unknown_attribute"
            } else {
                "slurp::toml"
            };
            let mut d = Diagnostic::new(code, message).help(
                "a spec has an optional `[defaults]` table and `[[task]]` tables with `name` and `command` (or `workflow`)",
            );
            if let Some(range) = error.span() {
                d = d.label(span(range), "here");
            }
            diags.push(Located {
                file: Some(file),
                diagnostic: d,
            });
            return Vec::new();
        }
    };
    let mut error = |d: Diagnostic| {
        diags.push(Located {
            file: Some(file),
            diagnostic: d,
        })
    };
    let defaults = spec
        .defaults
        .map(|d| attrs_of(file, &d, true))
        .unwrap_or_default();
    let mut entries = Vec::new();
    for mut task in spec.task {
        let name_span = span(task.name.span());
        if !slurp_grammar::is_identifier(&task.name.get_ref().replace(['-', '.'], "_")) {
            error(
                Diagnostic::new(
                    "slurp::syntax",
                    format!("`{}` is not a task name", task.name.get_ref()),
                )
                .label(
                    name_span,
                    "names use letters, digits, `_`, `-` and `.`, starting with a letter",
                ),
            );
            continue;
        }
        let mut attrs = defaults.clone();
        attrs.extend(attrs_of(file, &task.take_attrs(), false));
        if let Some(after) = &task.after {
            let value = match after.get_ref() {
                AfterDef::List(list) => list.join(","),
                AfterDef::One(one) => one.clone(),
            };
            attrs.push(attr(file, "after", value, span(after.span()), false));
        }
        let sweep = match &task.sweep {
            Some(table) => match sweep_of(table) {
                Ok(vars) => vars,
                Err(d) => {
                    error(d);
                    continue;
                }
            },
            None => Vec::new(),
        };
        let command = match (&task.command, &task.workflow) {
            (Some(command), None) => {
                let at = span(command.span());
                match command.get_ref() {
                    CommandDef::Argv(words) if !words.is_empty() => Command {
                        words: words
                            .iter()
                            .map(|w| Word {
                                text: w.clone(),
                                span: at,
                            })
                            .collect(),
                        shell: None,
                        span: at,
                        text: None,
                    },
                    CommandDef::Argv(_) => {
                        error(
                            Diagnostic::new("slurp::missing_command", "empty command")
                                .label(at, "no words"),
                        );
                        continue;
                    }
                    CommandDef::Line(line) => match slurp_grammar::parse_command(line) {
                        Ok(mut c) => {
                            // The shell text is the string's, not the TOML's
                            // source text (which may hold escapes).
                            c.text = Some(c.shell_text(line));
                            // Point into the TOML: the string starts after its quote.
                            let shift = |s: &mut Span| {
                                *s = Span::new(
                                    s.start as usize + at.start as usize + 1,
                                    s.end as usize + at.start as usize + 1,
                                )
                            };
                            shift(&mut c.span);
                            c.words.iter_mut().for_each(|w| shift(&mut w.span));
                            if let Some(r) = c.shell.as_mut() {
                                shift(&mut r.span);
                            }
                            c
                        }
                        Err(ds) => {
                            for mut d in ds {
                                d.labels.iter_mut().for_each(|l| l.span = at);
                                error(d);
                            }
                            continue;
                        }
                    },
                }
            }
            (None, Some(workflow)) => {
                let at = span(workflow.span());
                Command {
                    words: vec![
                        Word {
                            text: "slurp".into(),
                            span: at,
                        },
                        Word {
                            text: workflow.get_ref().clone(),
                            span: at,
                        },
                    ],
                    shell: None,
                    span: at,
                    text: None,
                }
            }
            (Some(command), Some(_)) => {
                error(
                    Diagnostic::new(
                        "slurp::syntax",
                        format!(
                            "task `{}` has both `command` and `workflow`",
                            task.name.get_ref()
                        ),
                    )
                    .label(
                        span(command.span()),
                        "a task runs a command or nests a workflow, not both",
                    ),
                );
                continue;
            }
            (None, None) => {
                error(
                    Diagnostic::new(
                        "slurp::missing_command",
                        format!("task `{}` has no command", task.name.get_ref()),
                    )
                    .label(
                        name_span,
                        "needs `command = [...]` or `workflow = \"FILE\"`",
                    ),
                );
                continue;
            }
        };
        let workflow = task
            .workflow
            .as_ref()
            .map(|w| (w.get_ref().clone(), span(w.span())));
        entries.push(Entry {
            file,
            line: sources.line_of(file, name_span.start),
            span: name_span,
            kind: EntryKind::Toml {
                name: task.name.get_ref().clone(),
                name_span,
                sweep,
                workflow,
            },
            command,
            attrs,
        });
    }
    entries
}

fn attr(file: FileId, key: &str, value: String, at: Span, from_defaults: bool) -> SourcedAttr {
    SourcedAttr {
        file,
        attr: Attr {
            key: Spanned::new(key.to_owned(), at),
            value: Spanned::new(value, at),
        },
        from_defaults,
    }
}

fn attrs_of(file: FileId, def: &AttrsDef, from_defaults: bool) -> Vec<SourcedAttr> {
    let scalar =
        |v: &Option<TSpanned<Scalar>>| v.as_ref().map(|v| (v.get_ref().text(), span(v.span())));
    let string =
        |v: &Option<TSpanned<String>>| v.as_ref().map(|v| (v.get_ref().clone(), span(v.span())));
    let given = [
        ("ntasks", scalar(&def.ntasks)),
        ("cores", scalar(&def.cores)),
        ("gpus", scalar(&def.gpus)),
        ("mem", scalar(&def.mem)),
        ("nodes", scalar(&def.nodes)),
        ("time", scalar(&def.time)),
        ("retries", scalar(&def.retries)),
        ("cwd", string(&def.cwd)),
        ("policy", string(&def.policy)),
        ("output", string(&def.output)),
    ];
    let mut out: Vec<SourcedAttr> = given
        .into_iter()
        .filter_map(|(key, value)| value.map(|(text, at)| attr(file, key, text, at, from_defaults)))
        .collect();
    if let Some(env) = &def.env {
        for (name, value) in env.get_ref() {
            let value = match value {
                toml::Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            out.push(attr(
                file,
                "env",
                format!("{name}={value}"),
                span(env.span()),
                from_defaults,
            ));
        }
    }
    out
}

/// `{ seed = "1..100", mode = ["a", "b"], n = [1, 2] }`, in written order.
fn sweep_of(table: &TSpanned<toml::Table>) -> Result<Vec<SweepVar>, Diagnostic> {
    let at = span(table.span());
    let bad = |name: &str, why: &str| {
        Diagnostic::new("slurp::bad_sweep", format!("sweep variable `{name}`: {why}"))
            .label(at, "in this sweep")
            .help("a sweep variable is a range string `\"1..100\"` or `\"0..1000:10\"`, or an array of values")
    };
    let mut vars = Vec::new();
    for (name, value) in table.get_ref() {
        if !slurp_grammar::is_identifier(name) {
            return Err(bad(name, "not a variable name"));
        }
        let function = |text: &str, name: &str| {
            text.strip_prefix(name)?
                .strip_prefix('(')?
                .strip_suffix(')')
                .filter(|a| !a.is_empty())
                .map(str::to_owned)
        };
        let values = match value {
            toml::Value::String(text) if function(text, "lines").is_some() => {
                SweepValues::Lines(function(text, "lines").unwrap_or_default())
            }
            toml::Value::String(text) if function(text, "glob").is_some() => {
                SweepValues::Glob(function(text, "glob").unwrap_or_default())
            }
            toml::Value::String(range) => {
                let (start, rest) = range.split_once("..").ok_or_else(|| {
                    bad(
                        name,
                        "a string must be a range `A..B`, `lines(FILE)` or `glob(PATTERN)`",
                    )
                })?;
                let (end, step) = rest.split_once(':').unwrap_or((rest, "1"));
                let number = |s: &str| {
                    s.parse::<i64>()
                        .map_err(|_| bad(name, &format!("`{s}` is not an integer")))
                };
                let values = SweepValues::Range {
                    start: number(start)?,
                    end: number(end)?,
                    step: number(step)?,
                };
                if matches!(values, SweepValues::Range { step: 0, .. }) || values.is_empty() {
                    return Err(bad(name, "the range is empty"));
                }
                values
            }
            toml::Value::Array(items) if !items.is_empty() => SweepValues::List(
                items
                    .iter()
                    .map(|v| match v {
                        toml::Value::String(s) => s.clone(),
                        other => other.to_string(),
                    })
                    .collect(),
            ),
            _ => return Err(bad(name, "expected a range string or a non-empty array")),
        };
        vars.push(SweepVar {
            name: Spanned::new(name.clone(), at),
            values: Spanned::new(values, at),
        });
    }
    if vars.is_empty() {
        return Err(Diagnostic::new("slurp::bad_sweep", "empty sweep").label(at, "no variables"));
    }
    Ok(vars)
}
