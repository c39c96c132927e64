//! Text → [`Ast`]: runs the pest grammar and builds typed nodes.
//!
//! Vocabulary (after `just`'s parser): `parse_*` builds a node from a pair of
//! the matching rule and records user mistakes as diagnostics; it never
//! fails. The grammar is total, so a pest failure is a bug in slurp and is
//! reported as one (`presume_parsed`). Each `parse_*` asserts its rule first.

use pest::Parser as _;
use pest::iterators::Pair;

use crate::ast::*;
use crate::diagnostic::Diagnostic;

#[derive(pest_derive::Parser)]
#[grammar = "slurp.pest"]
struct Grammar;

/// The most variables one sweep may have; a guard against pathological heads.
const MAX_SWEEP_VARS: usize = 16;

/// Shell builtins and keywords that cannot be exec'd: a command starting
/// with one of them runs through `/bin/sh -c` (the list GNU make keeps).
const SHELL_BUILTINS: &[&str] = &[
    ".", ":", "alias", "break", "case", "cd", "continue", "eval", "exec", "exit", "export", "for",
    "if", "readonly", "return", "set", "shift", "source", "test", "[", "trap", "ulimit", "umask",
    "unset", "until", "wait", "while", "{", "!",
];

/// Parses a whole slurp file. Always returns a tree (of the lines that could
/// be understood) and every diagnostic found.
pub fn parse(src: &str) -> (Ast, Vec<Diagnostic>) {
    let mut items = Vec::new();
    let diagnostics = parse_each(src, |item| items.push(item));
    (Ast { items }, diagnostics)
}

/// Like [`parse`], but hands each item to `sink` as soon as it is built,
/// so a large file is never held as a whole tree. Returns the diagnostics.
pub fn parse_each(src: &str, sink: impl FnMut(Item)) -> Vec<Diagnostic> {
    let mut parser = Builder::new(src);
    parser.parse_file(true, sink);
    parser.diagnostics
}

/// [`parse`] without the fast path for simple lines: every line through the
/// grammar. For tests that check the two agree.
#[doc(hidden)]
pub fn parse_with_grammar_only(src: &str) -> (Ast, Vec<Diagnostic>) {
    let mut parser = Builder::new(src);
    let mut items = Vec::new();
    parser.parse_file(false, |item| items.push(item));
    (Ast { items }, parser.diagnostics)
}

/// Parses one command written as a string (the TOML spec's `command = "…"`)
/// with the same quoting and shell rules as a line. Spans are relative to
/// `src`.
pub fn parse_command(src: &str) -> Result<Command, Vec<Diagnostic>> {
    let mut builder = Builder::new(src);
    let text = src.trim_end();
    let whole = Span::new(0, src.len());
    let command = match Grammar::parse(Rule::command, text) {
        Ok(mut pairs) => pairs.next().map(|pair| builder.parse_command(pair)),
        Err(_) => None,
    };
    match command {
        Some(command) if command.span.start == 0 && command.span.end as usize == text.len() => {
            if builder.diagnostics.is_empty() {
                Ok(command)
            } else {
                Err(builder.diagnostics)
            }
        }
        Some(command) => Err(vec![
            Diagnostic::new(
                "slurp::syntax",
                "a command string must be one command on one line",
            )
            .label(
                Span::new(command.span.end as usize, text.len()),
                "unexpected text after the command",
            )
            .help("give the command as an array of words to avoid quoting rules"),
        ]),
        None => Err(vec![
            Diagnostic::new("slurp::missing_command", "empty command")
                .label(whole, "expected a command")
                .help("a command starts with the program to run, e.g. `./sim --seed 3`"),
        ]),
    }
}

struct Builder<'s> {
    src: &'s str,
    diagnostics: Vec<Diagnostic>,
    /// Line counting is incremental: pest's `line_col` rescans from the start.
    line_pos: usize,
    line_no: u32,
    /// Where the text pest is looking at starts in `src`: lines are parsed
    /// one at a time, so pest's positions are relative to the line.
    base: usize,
}

impl<'s> Builder<'s> {
    fn new(src: &'s str) -> Self {
        Builder {
            src,
            diagnostics: Vec::new(),
            line_pos: 0,
            line_no: 1,
            base: 0,
        }
    }

    fn span_of(&self, pair: &Pair<'_, Rule>) -> Span {
        let span = pair.as_span();
        Span::new(self.base + span.start(), self.base + span.end())
    }

    fn error(&mut self, diagnostic: Diagnostic) {
        self.diagnostics.push(diagnostic);
    }

    fn line_of(&mut self, pos: usize) -> u32 {
        debug_assert!(pos >= self.line_pos);
        let skipped = &self.src.as_bytes()[self.line_pos..pos];
        self.line_no += skipped.iter().filter(|&&b| b == b'\n').count() as u32;
        self.line_pos = pos;
        self.line_no
    }

    /// Parses the text one logical line at a time with the grammar's `line`
    /// rule (the `file` rule says the same, whole). Per line, pest's token
    /// queue stays small; for the whole of a large file it would not.
    fn parse_file(&mut self, fast: bool, mut sink: impl FnMut(Item)) {
        let mut pos = 0;
        loop {
            if fast && let Some((item, next)) = self.parse_simple_line(pos) {
                item.into_iter().for_each(&mut sink);
                match next {
                    Some(next) => {
                        pos = next;
                        continue;
                    }
                    None => break,
                }
            }
            self.base = pos;
            let line = presume_parsed(Grammar::parse(Rule::line, &self.src[pos..]));
            let end = pos + line.as_span().end();
            if let Some(item) = self.parse_line(line) {
                sink(item);
            }
            let rest = &self.src[end..];
            pos = end
                + if rest.is_empty() {
                    break;
                } else if rest.starts_with("\r\n") {
                    2
                } else if rest.starts_with(['\n', '\r']) {
                    1
                } else {
                    unreachable!("the grammar's `line` ends at a newline or the end of the text")
                };
        }
    }

    /// The fast path: a valid legacy or plain line made only of literal
    /// characters (no quote, escape, comment, keyword or shell syntax) means
    /// exactly its blank-separated words, so pest's per-character work can
    /// be skipped. Such lines are most of a large task file. Returns the
    /// item (none for a blank line) and where the next line starts; `None`
    /// when the line needs the grammar (which also reports any mistake).
    fn parse_simple_line(&mut self, pos: usize) -> Option<(Option<Item>, Option<usize>)> {
        let bytes = self.src.as_bytes();
        let end = bytes[pos..]
            .iter()
            .position(|&b| b == b'\n')
            .map_or(bytes.len(), |n| pos + n);
        let next = (end < bytes.len()).then_some(end + 1);
        let line_end = if end > pos && bytes[end - 1] == b'\r' {
            end - 1
        } else {
            end
        };
        let line = &bytes[pos..line_end];
        if !line
            .iter()
            .all(|&b| b == b' ' || b == b'\t' || is_literal_byte(b))
        {
            return None;
        }
        let mut words = Vec::new();
        let mut start = None;
        for (i, &b) in line
            .iter()
            .enumerate()
            .chain(std::iter::once((line.len(), &b' ')))
        {
            match (b == b' ' || b == b'\t', start) {
                (true, Some(s)) => {
                    words.push(Word {
                        text: self.src[pos + s..pos + i].to_owned(),
                        span: Span::new(pos + s, pos + i),
                    });
                    start = None;
                }
                (false, None) => start = Some(i),
                _ => {}
            }
        }
        let Some(first) = words.first() else {
            return Some((None, next));
        };
        if matches!(first.text.as_str(), "task" | "defaults" | "include") {
            return None;
        }
        let span = Span {
            start: first.span.start,
            end: words[words.len() - 1].span.end,
        };
        let line_no = self.line_of(first.span.start as usize);
        // Legacy: a whole number, then 0 or 1 (the grammar's rule).
        let whole = |w: &Word| !w.text.is_empty() && w.text.bytes().all(|b| b.is_ascii_digit());
        let flag = words
            .get(1)
            .filter(|f| whole(first) && matches!(f.text.as_str(), "0" | "1"))
            .map(|f| Spanned::new(f.text == "1", f.span));
        let kind = if let Some(single_node) = flag {
            // NCORES 0 or past u32, or no command: the grammar says so.
            let ncores = first.text.parse::<u32>().ok().filter(|&n| n > 0)?;
            if words.len() < 3 {
                return None;
            }
            let ncores = Spanned::new(ncores, first.span);
            let words = words.split_off(2);
            ItemKind::Legacy(LegacyLine {
                ncores,
                single_node,
                command: simple_command(words),
            })
        } else {
            ItemKind::Plain(simple_command(words))
        };
        Some((
            Some(Item {
                line: line_no,
                span,
                kind,
            }),
            next,
        ))
    }

    fn parse_line(&mut self, pair: Pair<'_, Rule>) -> Option<Item> {
        assert_eq!(pair.as_rule(), Rule::line);
        let statement = pair.into_inner().find(|p| p.as_rule() != Rule::comment)?;
        let span = self.span_of(&statement);
        let line = self.line_of(self.base + statement.as_span().start());
        let kind = match statement.as_rule() {
            Rule::task => self.parse_task(statement).map(ItemKind::Task),
            Rule::task_malformed => {
                self.parse_task_malformed(statement);
                None
            }
            Rule::defaults => Some(ItemKind::Defaults(self.parse_defaults(statement))),
            Rule::include => self.parse_include(statement).map(ItemKind::Include),
            Rule::include_malformed => {
                self.error(
                    Diagnostic::new("slurp::syntax", "`include` takes exactly one path")
                        .label(span, "expected `include PATH`")
                        .help("quote a path that contains spaces: `include \"my tasks.slurp\"`"),
                );
                None
            }
            Rule::legacy => self.parse_legacy(statement).map(ItemKind::Legacy),
            Rule::plain => {
                let command = self.parse_command(only_child(statement));
                Some(ItemKind::Plain(command))
            }
            rule => unreachable!("a line holds a statement, not {rule:?}"),
        }?;
        Some(Item { line, span, kind })
    }

    fn parse_task(&mut self, pair: Pair<'_, Rule>) -> Option<TaskLine> {
        assert_eq!(pair.as_rule(), Rule::task);
        let head_span = self.span_of(&pair);
        let mut name = None;
        let mut sweep = None;
        let mut attrs = Vec::new();
        let mut command = None;
        let mut ok = true;
        for part in pair.into_inner() {
            match part.as_rule() {
                Rule::task_name => {
                    name = Some(Spanned::new(part.as_str().to_owned(), self.span_of(&part)))
                }
                Rule::sweep => sweep = self.parse_sweep(part),
                Rule::attr => attrs.push(self.parse_attr(part)),
                Rule::head_bad => {
                    ok = false;
                    self.error(
                        Diagnostic::new(
                            "slurp::syntax",
                            format!("expected an attribute `key=value`, found `{}`", part.as_str()),
                        )
                        .label(self.span_of(&part), "not `key=value`")
                        .help("a task head is `task NAME ATTR=VALUE ...:` and the command follows `: `"),
                    );
                }
                Rule::command => command = Some(self.parse_command(part)),
                rule => unreachable!("a task holds its parts, not {rule:?}"),
            }
        }
        let name = name.unwrap_or_else(|| unreachable!("the grammar requires a task name"));
        let Some(command) = command else {
            self.error(
                Diagnostic::new(
                    "slurp::missing_command",
                    format!("task `{}` has no command", name.node),
                )
                .label(
                    Span::new(head_span.end as usize - 1, head_span.end as usize),
                    "the command should follow this `:`",
                ),
            );
            return None;
        };
        ok.then_some(TaskLine {
            name,
            sweep,
            attrs,
            command,
        })
    }

    /// Says precisely what is wrong with a `task` line the grammar rejected.
    fn parse_task_malformed(&mut self, pair: Pair<'_, Rule>) {
        assert_eq!(pair.as_rule(), Rule::task_malformed);
        let span = self.span_of(&pair);
        let text = pair.as_str();
        let rest = text["task".len()..].trim_start();
        let rest_start = span.start as usize + (text.len() - rest.len());
        let name_len = rest
            .find(|c: char| !(c.is_ascii_alphanumeric() || "_-.".contains(c)))
            .unwrap_or(rest.len());
        let starts_ok = rest.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_');
        let diagnostic = if rest.is_empty() {
            Diagnostic::new("slurp::syntax", "`task` needs a name, attributes and a command")
                .label(span, "incomplete task line")
                .help("write `task NAME ATTR=VALUE ...: COMMAND`, or quote `'task'` to run a program named task")
        } else if !starts_ok || name_len == 0 {
            let bad = Span::new(
                rest_start,
                rest_start + rest.chars().next().map_or(1, char::len_utf8),
            );
            Diagnostic::new(
                "slurp::syntax",
                "a task name must start with a letter or `_`",
            )
            .label(bad, "not a task name")
            .help("names use letters, digits, `_`, `-` and `.`: `task sim_1: ...`")
        } else if let Some(bracket) = rest[name_len..].strip_prefix('[').map(|_| name_len) {
            let open = rest_start + bracket;
            Diagnostic::new("slurp::bad_sweep", "unclosed `[` in task name")
                .label(Span::new(open, open + 1), "this `[` is never closed")
                .help("a sweep is written `task NAME[var=1..10 other=a,b]: ...` on one line")
        } else {
            let end = span.end as usize;
            Diagnostic::new("slurp::syntax", "task line has no `: ` between its head and its command")
                .label(Span::new(end.saturating_sub(1).max(span.start as usize), end), "expected `: COMMAND` by here")
                .help("write `task NAME ATTR=VALUE ...: COMMAND` (the head ends at the first `:` followed by a space); to run a program named task, quote it: `'task' ...`")
        };
        self.error(diagnostic);
    }

    fn parse_sweep(&mut self, pair: Pair<'_, Rule>) -> Option<Spanned<Vec<SweepVar>>> {
        assert_eq!(pair.as_rule(), Rule::sweep);
        let span = self.span_of(&pair);
        let body = only_child(pair);
        let body_span = self.span_of(&body);
        let text = body.as_str();
        let mut vars: Vec<SweepVar> = Vec::new();
        let mut ok = true;
        for (offset, item) in split_blank(text) {
            let item_span = body_span.sub(offset, offset + item.len());
            let Some((name, values)) = item.split_once('=') else {
                self.error(
                    Diagnostic::new("slurp::bad_sweep", format!("expected `var=values` in a sweep, found `{item}`"))
                        .label(item_span, "no `=` here")
                        .help("a sweep variable is a range `seed=1..100`, `i=0..1000:10` or a list `a=x,y,z`"),
                );
                ok = false;
                continue;
            };
            let name_span = item_span.sub(0, name.len());
            let values_span = item_span.sub(name.len() + 1, item.len());
            if !is_identifier(name) {
                self.error(
                    Diagnostic::new(
                        "slurp::bad_sweep",
                        format!("`{name}` is not a variable name"),
                    )
                    .label(name_span, "expected a name of letters, digits and `_`"),
                );
                ok = false;
                continue;
            }
            if let Some(first) = vars.iter().find(|v| v.name.node == name) {
                self.error(
                    Diagnostic::new(
                        "slurp::bad_sweep",
                        format!("sweep variable `{name}` is given twice"),
                    )
                    .label(name_span, "given again here")
                    .label(first.name.span, "first given here"),
                );
                ok = false;
                continue;
            }
            match self.parse_sweep_values(values, values_span) {
                Some(values) => vars.push(SweepVar {
                    name: Spanned::new(name.to_owned(), name_span),
                    values: Spanned::new(values, values_span),
                }),
                None => ok = false,
            }
        }
        if vars.is_empty() && ok {
            self.error(
                Diagnostic::new("slurp::bad_sweep", "empty sweep")
                    .label(span, "no variables between the brackets")
                    .help("write `task NAME[seed=1..100]: ...`, or drop the brackets"),
            );
            return None;
        }
        if vars.len() > MAX_SWEEP_VARS {
            self.error(
                Diagnostic::new(
                    "slurp::bad_sweep",
                    format!("a sweep may have at most {MAX_SWEEP_VARS} variables"),
                )
                .label(span, format!("{} variables", vars.len())),
            );
            return None;
        }
        ok.then(|| Spanned::new(vars, span))
    }

    fn parse_sweep_values(&mut self, text: &str, span: Span) -> Option<SweepValues> {
        if text.is_empty() {
            self.error(
                Diagnostic::new("slurp::bad_sweep", "sweep variable has no values")
                    .label(span, "expected values after `=`")
                    .help("a range `1..100`, a range with a step `0..1000:10`, a list `a,b,c`, `lines(FILE)` or `glob(PATTERN)`"),
            );
            return None;
        }
        for (function, make) in [
            ("lines", SweepValues::Lines as fn(String) -> SweepValues),
            ("glob", SweepValues::Glob),
        ] {
            let Some(inner) = text
                .strip_prefix(function)
                .and_then(|t| t.strip_prefix('('))
            else {
                continue;
            };
            let Some(argument) = inner.strip_suffix(')').filter(|a| !a.is_empty()) else {
                self.error(
                    Diagnostic::new("slurp::bad_sweep", format!("`{function}(…)` needs its argument and a closing `)`"))
                        .label(span, format!("expected `{function}({})`", if function == "lines" { "FILE" } else { "PATTERN" }))
                        .help("`lines(inputs.txt)` takes one value per line of a file; `glob(data/*.csv)` the paths that match"),
                );
                return None;
            };
            return Some(make(argument.to_owned()));
        }
        if let Some((start, rest)) = text.split_once("..") {
            let (end, step) = match rest.split_once(':') {
                Some((end, step)) => (end, Some(step)),
                None => (rest, None),
            };
            let number = |this: &mut Self, part: &str, what: &str| -> Option<i64> {
                let offset = part.as_ptr() as usize - text.as_ptr() as usize;
                let part_span = span.sub(offset, offset + part.len());
                match part.parse::<i64>() {
                    Ok(v) => Some(v),
                    Err(_) => {
                        this.error(
                            Diagnostic::new("slurp::bad_number", format!("range {what} `{part}` is not an integer"))
                                .label(part_span, "expected an integer")
                                .help("ranges are integers: `1..100` or `0..1000:10`; use a list `a,b,c` for other values"),
                        );
                        None
                    }
                }
            };
            let start_v = number(self, start, "start");
            let end_v = number(self, end, "end");
            let step_v = match step {
                Some(step) => number(self, step, "step"),
                None => Some(1),
            };
            let (start, end, step) = (start_v?, end_v?, step_v?);
            if step == 0 {
                self.error(
                    Diagnostic::new("slurp::bad_sweep", "range step is 0")
                        .label(span, "this range never ends")
                        .help("use a positive step: `0..100:5`"),
                );
                return None;
            }
            let values = SweepValues::Range { start, end, step };
            if values.is_empty() {
                self.error(
                    Diagnostic::new("slurp::bad_sweep", format!("range `{text}` is empty"))
                        .label(span, "no value lies in this range")
                        .help(format!(
                            "ranges include both ends; to count down write `{start}..{end}:-1`"
                        )),
                );
                return None;
            }
            return Some(values);
        }
        let mut values = Vec::new();
        let mut offset = 0;
        for value in text.split(',') {
            if value.is_empty() {
                let at = span.sub(offset, offset + 1.min(text.len() - offset));
                self.error(
                    Diagnostic::new("slurp::bad_sweep", "empty value in sweep list")
                        .label(at, "nothing between these commas")
                        .help("write the values separated by single commas: `a,b,c`"),
                );
                return None;
            }
            offset += value.len() + 1;
            values.push(value.to_owned());
        }
        Some(SweepValues::List(values))
    }

    fn parse_attr(&mut self, pair: Pair<'_, Rule>) -> Attr {
        assert_eq!(pair.as_rule(), Rule::attr);
        let mut parts = pair.into_inner();
        let key = parts
            .next()
            .unwrap_or_else(|| unreachable!("attr has a key"));
        let value = parts
            .next()
            .unwrap_or_else(|| unreachable!("attr has a value"));
        let value_span = self.span_of(&value);
        let mut text = String::new();
        for part in value.into_inner() {
            match part.as_rule() {
                Rule::attr_text => text.push_str(part.as_str()),
                Rule::squote => text.push_str(strip_quotes(part.as_str())),
                Rule::dquote => self.unquote_double(part.as_str(), &mut text),
                Rule::squote_open | Rule::dquote_open => self.unbalanced_quote(&part),
                rule => unreachable!("attribute value part, not {rule:?}"),
            }
        }
        Attr {
            key: Spanned::new(key.as_str().to_owned(), self.span_of(&key)),
            value: Spanned::new(text, value_span),
        }
    }

    fn parse_defaults(&mut self, pair: Pair<'_, Rule>) -> Vec<Attr> {
        assert_eq!(pair.as_rule(), Rule::defaults);
        let mut attrs = Vec::new();
        for part in pair.into_inner() {
            match part.as_rule() {
                Rule::attr => attrs.push(self.parse_attr(part)),
                Rule::bad_word => self.error(
                    Diagnostic::new(
                        "slurp::syntax",
                        format!(
                            "expected an attribute `key=value`, found `{}`",
                            part.as_str()
                        ),
                    )
                    .label(self.span_of(&part), "not `key=value`")
                    .help("`defaults` takes attributes only, e.g. `defaults cores=2 time=10m`"),
                ),
                rule => unreachable!("defaults hold attributes, not {rule:?}"),
            }
        }
        attrs
    }

    fn parse_include(&mut self, pair: Pair<'_, Rule>) -> Option<Spanned<String>> {
        assert_eq!(pair.as_rule(), Rule::include);
        let word = only_child(pair);
        let span = self.span_of(&word);
        let mut shell = None;
        let text = self.parse_word(word, &mut shell);
        if let Some(reason) = shell {
            self.error(
                Diagnostic::new("slurp::syntax", "an include path cannot use shell syntax")
                    .label(reason.span, reason.what)
                    .help("name one file, quoted if it has special characters"),
            );
            return None;
        }
        Some(Spanned::new(text, span))
    }

    fn parse_legacy(&mut self, pair: Pair<'_, Rule>) -> Option<LegacyLine> {
        assert_eq!(pair.as_rule(), Rule::legacy);
        let span = self.span_of(&pair);
        let mut parts = pair.into_inner();
        let ncores_pair = parts
            .next()
            .unwrap_or_else(|| unreachable!("legacy line starts with NCORES"));
        let ncores_span = self.span_of(&ncores_pair);
        let ncores = match ncores_pair.as_str().parse::<u32>() {
            Ok(0) => {
                self.error(
                    Diagnostic::new("slurp::legacy_ncores", "NCORES is 0")
                        .label(ncores_span, "a task needs at least one core")
                        .help("the line is `NCORES SINGLENODE COMMAND`; NCORES counts the copies to run, 1 or more"),
                );
                None
            }
            Ok(n) => Some(n),
            Err(_) => {
                self.error(
                    Diagnostic::new(
                        "slurp::legacy_ncores",
                        format!(
                            "NCORES `{}` is not a positive whole number",
                            ncores_pair.as_str()
                        ),
                    )
                    .label(ncores_span, "expected a number of cores such as `4`")
                    .help(
                        "a line that starts with a number is `NCORES SINGLENODE COMMAND [ARGS...]`",
                    ),
                );
                None
            }
        };
        let mut single_node = None;
        let mut command = None;
        for part in parts {
            match part.as_rule() {
                // The grammar takes only `0` or `1` here.
                Rule::legacy_flag => {
                    single_node = Some(Spanned::new(part.as_str() == "1", self.span_of(&part)));
                }
                Rule::command => command = Some(self.parse_command(part)),
                rule => unreachable!("legacy line part, not {rule:?}"),
            }
        }
        if command.is_none() {
            self.error(
                Diagnostic::new("slurp::legacy_incomplete", "legacy line is missing COMMAND")
                    .label(span, "expected `NCORES SINGLENODE COMMAND [ARGS...]`")
                    .help("for example `4 1 ./simulate input.dat`: 4 copies, all on one node"),
            );
        }
        Some(LegacyLine {
            ncores: Spanned::new(ncores?, ncores_span),
            single_node: single_node?,
            command: command?,
        })
    }

    fn parse_command(&mut self, pair: Pair<'_, Rule>) -> Command {
        assert_eq!(pair.as_rule(), Rule::command);
        let span = self.span_of(&pair);
        let mut words = Vec::new();
        let mut shell = None;
        for word in pair.into_inner() {
            let word_span = self.span_of(&word);
            let text = self.parse_word(word, &mut shell);
            words.push(Word {
                text,
                span: word_span,
            });
        }
        if shell.is_none() {
            shell = shell_by_first_word(&words);
        }
        Command {
            words,
            shell,
            span,
            text: None,
        }
    }

    /// Removes quotes and escapes; notes the first unquoted shell syntax.
    fn parse_word(&mut self, pair: Pair<'_, Rule>, shell: &mut Option<ShellReason>) -> String {
        assert_eq!(pair.as_rule(), Rule::word);
        let mut text = String::new();
        let mut first = true;
        for part in pair.into_inner() {
            let s = part.as_str();
            match part.as_rule() {
                Rule::lit => {
                    if first && s.starts_with('~') && shell.is_none() {
                        *shell = Some(ShellReason {
                            span: self.span_of(&part).sub(0, 1),
                            what: "`~` home directory".to_owned(),
                        });
                    }
                    text.push_str(s);
                }
                Rule::squote => text.push_str(strip_quotes(s)),
                Rule::dquote => {
                    if shell.is_none()
                        && let Some(reason) = double_quote_expansion(s, self.span_of(&part))
                    {
                        *shell = Some(reason);
                    }
                    self.unquote_double(s, &mut text);
                }
                Rule::escape => text.push_str(&s[1..]),
                Rule::word_join => {}
                Rule::meta => {
                    if shell.is_none() {
                        *shell = Some(ShellReason {
                            span: self.span_of(&part),
                            what: describe_meta(s).to_owned(),
                        });
                    }
                    text.push_str(s);
                }
                Rule::squote_open | Rule::dquote_open => self.unbalanced_quote(&part),
                rule => unreachable!("word part, not {rule:?}"),
            }
            first = false;
        }
        text
    }

    /// Inside `"…"` a backslash escapes only `$`, `` ` ``, `"`, `\` and a
    /// newline (POSIX sh); before any other character it stays.
    fn unquote_double(&mut self, quoted: &str, out: &mut String) {
        let inner = strip_quotes(quoted);
        let mut chars = inner.chars().peekable();
        while let Some(c) = chars.next() {
            if c != '\\' {
                out.push(c);
                continue;
            }
            match chars.peek() {
                Some('$' | '`' | '"' | '\\') => out.push(chars.next().unwrap_or('\\')),
                Some('\n') => {
                    chars.next();
                }
                Some('\r') => {
                    chars.next();
                    chars.next();
                }
                _ => out.push('\\'),
            }
        }
    }

    fn unbalanced_quote(&mut self, part: &Pair<'_, Rule>) {
        let span = self.span_of(part);
        let quote = &part.as_str()[..1];
        let other = if quote == "'" { "\"" } else { "'" };
        self.error(
            Diagnostic::new("slurp::unbalanced_quote", format!("unbalanced {quote} quote"))
                .label(span.sub(0, 1), "this quote is never closed on its line")
                .help(format!(
                    "close it with {quote} before the end of the line, or escape it as \\{quote} or quote it with {other}…{other}"
                )),
        );
    }
}

fn presume_parsed<'s>(
    result: Result<pest::iterators::Pairs<'s, Rule>, pest::error::Error<Rule>>,
) -> Pair<'s, Rule> {
    match result {
        Ok(mut pairs) => pairs
            .next()
            .unwrap_or_else(|| unreachable!("a successful parse yields its rule")),
        // The grammar accepts every input; failing here is slurp's bug.
        Err(error) => panic!(
            "internal error: the slurp grammar rejected its input, please report this bug:\n{error}"
        ),
    }
}

fn only_child(pair: Pair<'_, Rule>) -> Pair<'_, Rule> {
    let rule = pair.as_rule();
    let mut inner = pair.into_inner();
    match (inner.next(), inner.next()) {
        (Some(child), None) => child,
        _ => unreachable!("the grammar gives {rule:?} exactly one child"),
    }
}

/// A byte the grammar's `lit` takes anywhere in a word: not blank, not a
/// line end, not a quote, escape, comment or shell character, not `~`
/// (which is shell syntax at the start of a word). Bytes of multi-byte
/// UTF-8 characters are literal.
fn is_literal_byte(b: u8) -> bool {
    !matches!(
        b,
        b' ' | b'\t'
            | b'\r'
            | b'\n'
            | b'\''
            | b'"'
            | b'\\'
            | b'|'
            | b'&'
            | b';'
            | b'<'
            | b'>'
            | b'('
            | b')'
            | b'$'
            | b'`'
            | b'*'
            | b'?'
            | b'#'
            | b'~'
    )
}

fn simple_command(words: Vec<Word>) -> Command {
    let span = Span {
        start: words[0].span.start,
        end: words[words.len() - 1].span.end,
    };
    let shell = shell_by_first_word(&words);
    Command {
        words,
        shell,
        span,
        text: None,
    }
}

fn strip_quotes(s: &str) -> &str {
    &s[1..s.len() - 1]
}

pub(crate) fn is_identifier(s: &str) -> bool {
    let mut chars = s.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Splits on spaces and tabs, yielding each piece with its byte offset.
fn split_blank(text: &str) -> impl Iterator<Item = (usize, &str)> {
    text.split([' ', '\t'])
        .filter(|s| !s.is_empty())
        .map(move |s| (s.as_ptr() as usize - text.as_ptr() as usize, s))
}

fn describe_meta(meta: &str) -> &'static str {
    match meta {
        "|" => "`|` pipe",
        "||" => "`||` or-list",
        "&&" => "`&&` and-list",
        "&" => "`&` background",
        ";" => "`;` command list",
        "<" => "`<` redirection",
        ">" => "`>` redirection",
        "(" | ")" => "`(` subshell",
        "$" => "`$` expansion",
        "`" => "`` ` `` command substitution",
        "*" => "`*` glob",
        "?" => "`?` glob",
        _ => "shell syntax",
    }
}

/// `$` and backquotes keep their meaning inside double quotes.
fn double_quote_expansion(quoted: &str, span: Span) -> Option<ShellReason> {
    let bytes = quoted.as_bytes();
    let mut i = 1;
    while i + 1 < bytes.len() {
        match bytes[i] {
            b'\\' => i += 2,
            b'$' | b'`' => {
                let what = if bytes[i] == b'$' {
                    "`$` expansion"
                } else {
                    "`` ` `` command substitution"
                };
                return Some(ShellReason {
                    span: span.sub(i, i + 1),
                    what: what.to_owned(),
                });
            }
            _ => i += 1,
        }
    }
    None
}

/// A leading `NAME=value` or a shell builtin cannot be exec'd.
fn shell_by_first_word(words: &[Word]) -> Option<ShellReason> {
    let first = words.first()?;
    if let Some((name, _)) = first.text.split_once('=')
        && is_identifier(name)
    {
        return Some(ShellReason {
            span: first.span,
            what: "leading variable assignment".to_owned(),
        });
    }
    SHELL_BUILTINS
        .contains(&first.text.as_str())
        .then(|| ShellReason {
            span: first.span,
            what: format!("`{}` is a shell builtin", first.text),
        })
}
