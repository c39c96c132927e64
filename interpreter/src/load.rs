//! Reading files and turning their lines into entries.
//!
//! An [`Entry`] is one line that will become tasks, with everything that
//! applies to it: its own attributes and the `defaults` in force where it
//! stands. `include` is textual, as in C: the included file's lines are
//! entries of the including workflow, and `defaults` flow through includes
//! in both directions. Include cycles are reported with their chain.

use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use slurp_grammar::{Attr, Command, Diagnostic, ItemKind, Span, SweepVar};
use slurp_runtime::FileId;

use crate::report::{Located, Sources};

/// Files bigger than this are refused before parsing (spans are `u32`).
const MAX_FILE_SIZE: usize = u32::MAX as usize;

/// One line that becomes tasks.
#[derive(Debug)]
pub(crate) struct Entry {
    pub file: FileId,
    pub line: u32,
    pub span: Span,
    pub kind: EntryKind,
    pub command: Command,
    /// `defaults` in force, then the line's own attributes (which win).
    pub attrs: Vec<SourcedAttr>,
}

#[derive(Debug)]
pub(crate) enum EntryKind {
    Task {
        name: String,
        name_span: Span,
        sweep: Vec<SweepVar>,
    },
    Legacy {
        ncores: u32,
        single_node: bool,
    },
    Plain,
    /// A `[[task]]` of a TOML spec; `command` spans point into the TOML.
    Toml {
        name: String,
        name_span: Span,
        sweep: Vec<SweepVar>,
        /// `workflow = "…"`: a nested entry without a `slurp` command.
        workflow: Option<(String, Span)>,
    },
}

/// An attribute and the file it was written in.
#[derive(Debug, Clone)]
pub(crate) struct SourcedAttr {
    pub file: FileId,
    pub attr: Attr,
    pub from_defaults: bool,
}

/// How deep includes may nest: far past any real workflow, and well before
/// the parser's stack runs out (a chain of 5,000 once did).
pub(crate) const MAX_INCLUDE_DEPTH: usize = 256;

/// Includes one load may expand in all (a file included twice counts
/// twice): files that each include the next twice grow as 2^depth, and
/// with no task among them `--max-tasks` would never stop them.
pub(crate) const MAX_INCLUDES: u64 = 100_000;

/// Reads a file into `sources`, reporting a missing or unreadable file at
/// `origin` (the include or nested line that named it).
pub(crate) fn read_file(
    path: &Path,
    cwd: &Path,
    origin: Option<(FileId, Span)>,
    sources: &mut Sources,
    diags: &mut Vec<Located>,
) -> Option<FileId> {
    let stdin = path == Path::new("-");
    let absolute = if stdin {
        PathBuf::from("-")
    } else {
        normalize(&cwd.join(path))
    };
    if let Some(id) = sources.find(&absolute) {
        return Some(id);
    }
    let display = display_path(&absolute, cwd);
    // Only regular files — and, for the workflow itself, a pipe (`slurp
    // <(generate)`, as standard input): a device (`/dev/zero`) never ends,
    // and an included FIFO would wait for a writer for good.
    let kind = (!stdin)
        .then(|| std::fs::metadata(&absolute).ok())
        .flatten()
        .map(|m| m.file_type());
    let pipe = |k: &std::fs::FileType| {
        use std::os::unix::fs::FileTypeExt;
        k.is_fifo()
    };
    if let Some(kind) = kind
        && !kind.is_file()
        && !(origin.is_none() && pipe(&kind))
    {
        let what = if kind.is_dir() {
            "a directory"
        } else {
            "not a regular file (a device, FIFO or socket)"
        };
        let mut d = Diagnostic::new("slurp::not_a_file", format!("`{display}` is {what}"))
            .help("name a workflow file; `-` reads one from standard input");
        if let Some((_, span)) = origin {
            d = d.label(span, "named here");
        }
        diags.push(Located {
            file: origin.map(|(f, _)| f),
            diagnostic: d,
        });
        return None;
    }
    let bytes = if stdin {
        let mut buf = Vec::new();
        std::io::Read::read_to_end(&mut std::io::stdin(), &mut buf).map(|_| buf)
    } else {
        std::fs::read(&absolute)
    };
    let bytes = match bytes {
        Ok(bytes) => bytes,
        Err(error) => {
            let what = if origin.is_some() {
                "file"
            } else {
                "workflow file"
            };
            let mut d = Diagnostic::new(
                "slurp::missing_file",
                format!("cannot read {what} `{display}`: {}", io_reason(&error)),
            );
            if let Some((_, span)) = origin {
                d = d.label(span, "named here");
            }
            d = d.help(match origin {
                Some(_) => "paths are relative to the directory of the file that names them",
                None => "check the path; `-` reads the workflow from standard input",
            });
            diags.push(Located {
                file: origin.map(|(f, _)| f),
                diagnostic: d,
            });
            return None;
        }
    };
    if bytes.len() > MAX_FILE_SIZE {
        diags.push(Located {
            file: origin.map(|(f, _)| f),
            diagnostic: Diagnostic::new(
                "slurp::file_too_large",
                format!("`{display}` is larger than 4 GiB"),
            )
            .help("split it into several files and `include` them"),
        });
        return None;
    }
    match String::from_utf8(bytes) {
        Ok(text) => {
            let nul = text.find('\0');
            let count = nul.map_or(0, |_| text.bytes().filter(|&b| b == 0).count());
            let id = sources.add(absolute, display.clone(), Arc::from(text));
            // An argument cannot hold a NUL byte (exec would refuse it at
            // run time): said at the first, before anything runs.
            if let Some(at) = nul {
                diags.push(Located {
                    file: Some(id),
                    diagnostic: Diagnostic::new(
                        "slurp::nul_byte",
                        if count == 1 {
                            format!("`{display}` holds a NUL byte")
                        } else {
                            format!("`{display}` holds {count} NUL bytes")
                        },
                    )
                    .label(Span::new(at, at + 1), "a NUL byte")
                    .help("commands and values cannot hold a NUL byte; is this a binary file?"),
                });
            }
            Some(id)
        }
        Err(error) => {
            let valid = error.utf8_error().valid_up_to();
            let bad_len = error.utf8_error().error_len().unwrap_or(1);
            // The lossy text is identical up to the first bad byte, so the
            // span still points at it.
            let text = String::from_utf8_lossy(error.as_bytes()).into_owned();
            let char_len = text[valid..].chars().next().map_or(0, char::len_utf8);
            let id = sources.add(absolute, display.clone(), Arc::from(text));
            diags.push(Located {
                file: Some(id),
                diagnostic: Diagnostic::new(
                    "slurp::invalid_utf8",
                    format!("`{display}` is not valid UTF-8"),
                )
                .label(
                    Span::new(valid, valid + char_len),
                    format!("{bad_len} byte(s) that are not UTF-8 start here"),
                )
                .help("save the file as UTF-8 (e.g. `iconv -f latin1 -t utf-8`)"),
            });
            None
        }
    }
}

fn io_reason(error: &std::io::Error) -> String {
    match error.kind() {
        std::io::ErrorKind::NotFound => "no such file".to_owned(),
        std::io::ErrorKind::PermissionDenied => "permission denied".to_owned(),
        std::io::ErrorKind::IsADirectory => "it is a directory".to_owned(),
        _ => error.to_string(),
    }
}

/// Lexically normalised absolute path (no `.`/`..`); symlinks are kept so
/// messages show the names the user wrote.
pub(crate) fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

/// Relative to the working directory when below it, else absolute.
pub(crate) fn display_path(path: &Path, cwd: &Path) -> String {
    if path == Path::new("-") {
        return "<stdin>".to_owned();
    }
    path.strip_prefix(cwd)
        .map_or_else(|_| path.display().to_string(), |p| p.display().to_string())
}

/// Where entries go as they are read, and what reading needs.
pub(crate) trait EntrySink {
    fn sources(&mut self) -> &mut Sources;
    fn diags(&mut self) -> &mut Vec<Located>;
    fn cwd(&self) -> &Path;
    fn entry(&mut self, entry: Entry);
    /// The workflow is already past `--max-tasks` (said once): nothing more
    /// need be read.
    fn full(&self) -> bool {
        false
    }
}

/// Reads the entries of a line-format file, following includes, and hands
/// each to the sink as soon as it is read: a large file is never held as a
/// whole tree.
#[derive(Default)]
pub(crate) struct Collector {
    defaults: Vec<SourcedAttr>,
    /// Files being included, outermost first.
    include_stack: Vec<FileId>,
    /// Includes expanded so far, against [`MAX_INCLUDES`].
    includes: u64,
}

impl Collector {
    pub fn collect(&mut self, file: FileId, sink: &mut dyn EntrySink) {
        self.include_stack.push(file);
        let text = sink.sources().get(file).text.clone();
        let syntax = slurp_grammar::parse_each(&text, |item| {
            let (kind, command, own) = match item.kind {
                ItemKind::Defaults(attrs) => {
                    self.set_defaults(file, attrs, sink);
                    return;
                }
                ItemKind::Include(path) => {
                    self.include(file, &path.node, path.span, sink);
                    return;
                }
                ItemKind::Task(task) => (
                    EntryKind::Task {
                        name: task.name.node,
                        name_span: task.name.span,
                        sweep: task.sweep.map(|s| s.node).unwrap_or_default(),
                    },
                    task.command,
                    task.attrs,
                ),
                ItemKind::Legacy(legacy) => (
                    EntryKind::Legacy {
                        ncores: legacy.ncores.node,
                        single_node: legacy.single_node.node,
                    },
                    legacy.command,
                    Vec::new(),
                ),
                ItemKind::Plain(command) => (EntryKind::Plain, command, Vec::new()),
            };
            let mut attrs = self.defaults.clone();
            attrs.extend(own.into_iter().map(|attr| SourcedAttr {
                file,
                attr,
                from_defaults: false,
            }));
            sink.entry(Entry {
                file,
                line: item.line,
                span: item.span,
                kind,
                command,
                attrs,
            });
        });
        sink.diags()
            .extend(syntax.into_iter().map(|diagnostic| Located {
                file: Some(file),
                diagnostic,
            }));
        self.include_stack.pop();
    }

    /// A `defaults` line replaces the keys it names (`env` adds variables).
    fn set_defaults(&mut self, file: FileId, attrs: Vec<Attr>, sink: &mut dyn EntrySink) {
        for attr in attrs {
            if attr.key.node == "after" {
                sink.diags().push(Located {
                    file: Some(file),
                    diagnostic: Diagnostic::new(
                        "slurp::bad_attribute",
                        "`after` cannot be a default",
                    )
                    .label(attr.key.span, "not allowed in `defaults`")
                    .help("put `after=` on each task that must wait"),
                });
                continue;
            }
            if attr.key.node != "env" {
                self.defaults.retain(|d| d.attr.key.node != attr.key.node);
            }
            self.defaults.push(SourcedAttr {
                file,
                attr,
                from_defaults: true,
            });
        }
    }

    fn include(&mut self, file: FileId, path: &str, span: Span, sink: &mut dyn EntrySink) {
        if sink.full() || self.includes > MAX_INCLUDES {
            return;
        }
        self.includes += 1;
        if self.includes > MAX_INCLUDES {
            sink.diags().push(Located {
                file: Some(file),
                diagnostic: Diagnostic::new(
                    "slurp::include_count",
                    format!("includes expand to more than {MAX_INCLUDES} files"),
                )
                .label(span, "the include past the limit")
                .help("a file included twice is read twice: files that each include the next twice double at every level"),
            });
            return;
        }
        let cwd = sink.cwd().to_path_buf();
        let base = sink
            .sources()
            .get(file)
            .path
            .parent()
            .map(Path::to_path_buf);
        let base = base.unwrap_or_else(|| cwd.clone());
        let target = normalize(&base.join(path));
        let sources = sink.sources();
        if let Some(pos) = self
            .include_stack
            .iter()
            .position(|f| sources.get(*f).path == target)
        {
            let chain: Vec<String> = self.include_stack[pos..]
                .iter()
                .map(|f| sources.get(*f).display.clone())
                .chain(std::iter::once(display_path(&target, &cwd)))
                .collect();
            sink.diags().push(Located {
                file: Some(file),
                diagnostic: Diagnostic::new(
                    "slurp::include_recursion",
                    format!("include cycle: {}", chain.join(" → ")),
                )
                .label(span, "includes a file that is already being included")
                .help("an included file may not include itself, directly or through others"),
            });
            return;
        }
        if self.include_stack.len() >= MAX_INCLUDE_DEPTH {
            sink.diags().push(Located {
                file: Some(file),
                diagnostic: Diagnostic::new(
                    "slurp::include_depth",
                    format!("includes nest deeper than {MAX_INCLUDE_DEPTH} files"),
                )
                .label(span, "this include is one too deep")
                .help("flatten the chain: include the files from one that lists them"),
            });
            return;
        }
        let mut diags = std::mem::take(sink.diags());
        let included = read_file(
            &target,
            &cwd,
            Some((file, span)),
            sink.sources(),
            &mut diags,
        );
        *sink.diags() = diags;
        if let Some(included) = included {
            self.collect(included, sink);
        }
    }
}
