//! Dependencies: `after=` resolved to tasks, the DAG built and checked.
//!
//! A reference is a task name (all its instances), `name[*]` (the same),
//! `name[v]` / `name[v1,v2]` (one instance by its values, `*` for any value
//! of a variable), with `{var}` placeholders evaluated per instance for
//! element-wise dependencies (`post[s=1..9] after=sim[{s}]`). References
//! whose selectors are constant are resolved once per template, not once
//! per instance. Names must be unique in a workflow; the graph must be
//! acyclic, and a cycle is reported as the chain of task ids that forms it.

use std::collections::{HashMap, VecDeque};

use slurp_grammar::{Diagnostic, Span};
use slurp_runtime::{FileId, TaskId, Template, TemplateId, Text, Workflow};

use crate::attrs;
use crate::lower::tasks_of;
use crate::report::Located;

/// Per template: its name's place, and its `after=` if any.
pub(crate) struct DepSpec {
    pub template: TemplateId,
    pub file: FileId,
    pub name_span: Span,
    /// False for unnamed lines (`@7`), which cannot be referred to.
    pub named: bool,
    pub after: Option<After>,
}

pub(crate) struct After {
    pub file: FileId,
    pub text: String,
    pub span: Span,
    pub substitute: bool,
}

/// One reference of an `after=` list.
struct Ref {
    name: String,
    /// `None`: the whole template. Otherwise one selector per variable,
    /// `None` meaning `*`.
    selector: Option<Vec<Option<Text>>>,
    span: Span,
}

/// Fills `workflow.graph` from the specs; reports into `diags`.
pub(crate) fn build(workflow: &mut Workflow, specs: Vec<DepSpec>, diags: &mut Vec<Located>) {
    let mut errors = Vec::new();
    let edges = resolve(workflow, &specs, &mut errors);
    let acyclic = edges.is_empty();
    workflow.graph = slurp_runtime::Graph::from_edges(edges);
    // Without an edge there is no cycle (and no walk over 10⁷ nodes).
    if errors.is_empty()
        && !acyclic
        && let Err(cycle) = petgraph::algo::toposort(&workflow.graph, None)
    {
        errors.push(report_cycle(workflow, cycle.node_id(), &specs));
    }
    diags.extend(errors);
}

/// Adds the graph of tasks appended to a workflow that already has tasks,
/// whose referable templates are `old` by name: `specs` are the new
/// templates' (whose tasks start at `first`), whose `after=` may name the
/// old tasks as well as each other. A new name may not be an old one. Nothing is added on a mistake.
pub(crate) fn extend(
    workflow: &mut Workflow,
    first: u32,
    old: &HashMap<Box<str>, TemplateId>,
    specs: Vec<DepSpec>,
    diags: &mut Vec<Located>,
) {
    // The old tasks the new ones name (or would name again), as specs
    // without `after=`: found by name, not by walking every old template,
    // so a thousand submissions cost no more each than the first.
    let mut wanted: Vec<&str> = Vec::new();
    for spec in &specs {
        if let Some(name) = workflow.template(spec.template).name.as_deref() {
            wanted.push(name);
        }
        if let Some(after) = &spec.after {
            let mut depth = 0i32;
            let mut start = 0;
            for (i, c) in after
                .text
                .char_indices()
                .chain(std::iter::once((after.text.len(), ',')))
            {
                match c {
                    '[' => depth += 1,
                    ']' => depth -= 1,
                    ',' if depth == 0 => {
                        let item = &after.text[start..i];
                        wanted.push(item.split('[').next().unwrap_or(item));
                        start = i + 1;
                    }
                    _ => {}
                }
            }
        }
    }
    wanted.sort_unstable();
    wanted.dedup();
    let mut all: Vec<DepSpec> = wanted
        .iter()
        .filter_map(|name| old.get(*name))
        .map(|&id| {
            let t = workflow.template(id);
            DepSpec {
                template: id,
                file: t.source.file,
                name_span: Span {
                    start: t.source.start,
                    end: t.source.end,
                },
                named: true,
                after: None,
            }
        })
        .collect();
    all.extend(specs);
    let mut errors = Vec::new();
    let edges = resolve(workflow, &all, &mut errors);
    if !errors.is_empty() {
        diags.extend(errors);
        return;
    }
    for &(from, to) in &edges {
        workflow.graph.add_edge(from, to, ());
    }
    // A cycle can only run through new tasks (old ones wait for no new
    // one): Kahn's walk over the new tasks with edges among them, not over
    // the whole workflow.
    let mut indegree: HashMap<u32, u32> = HashMap::new();
    for &(from, to) in &edges {
        if from >= first {
            indegree.entry(from).or_insert(0);
            *indegree.entry(to).or_insert(0) += 1;
        }
    }
    let mut ready: Vec<u32> = indegree
        .iter()
        .filter(|&(_, &d)| d == 0)
        .map(|(&t, _)| t)
        .collect();
    let mut seen = 0;
    while let Some(t) = ready.pop() {
        seen += 1;
        for next in workflow
            .graph
            .neighbors_directed(t, petgraph::Direction::Outgoing)
        {
            if let Some(d) = indegree.get_mut(&next) {
                *d -= 1;
                if *d == 0 {
                    ready.push(next);
                }
            }
        }
    }
    if seen < indegree.len() {
        let start = indegree
            .iter()
            .filter(|&(_, &d)| d > 0)
            .map(|(&t, _)| t)
            .min()
            .unwrap_or(first);
        diags.push(report_cycle(workflow, start, &all));
        let new: Vec<u32> = workflow.graph.nodes().filter(|&t| t >= first).collect();
        for t in new {
            workflow.graph.remove_node(t);
        }
    }
}

/// The dependency edges `(dependency, dependent)` the specs' `after=`
/// lists name, sorted and without repeats; mistakes go to `errors`.
fn resolve(workflow: &Workflow, specs: &[DepSpec], errors: &mut Vec<Located>) -> Vec<(u32, u32)> {
    let mut names: HashMap<&str, usize> = HashMap::new();
    for (i, spec) in specs.iter().enumerate() {
        if !spec.named {
            continue;
        }
        let Some(name) = workflow.template(spec.template).name.as_deref() else {
            continue;
        };
        if let Some(&first) = names.get(name) {
            let first: &DepSpec = &specs[first];
            let mut d = Diagnostic::new(
                "slurp::duplicate_task",
                format!("task `{name}` is defined twice"),
            )
            .label(spec.name_span, "defined again here")
            .help("task names must be unique in a workflow; rename one of them");
            if first.file == spec.file {
                d = d.label(first.name_span, "first defined here");
            }
            errors.push(Located {
                file: Some(spec.file),
                diagnostic: d,
            });
        } else {
            names.insert(name, i);
        }
    }

    let mut edges: Vec<(u32, u32)> = Vec::new();
    for spec in specs {
        let Some(after) = &spec.after else { continue };
        let template = workflow.template(spec.template);
        let vars: Vec<&str> = template.sweep.iter().map(|a| &*a.name).collect();
        let refs = match parse_refs(&after.text, after.span, &vars, after.substitute) {
            Ok(refs) => refs,
            Err(d) => {
                errors.push(Located {
                    file: Some(after.file),
                    diagnostic: d,
                });
                continue;
            }
        };
        let own = tasks_of(workflow, spec.template);
        for r in refs {
            let Some(&target_spec) = names.get(r.name.as_str()) else {
                let mut d = Diagnostic::new(
                    "slurp::unknown_dependency",
                    format!("no task named `{}`", r.name),
                )
                .label(r.span, "unknown task");
                d = match attrs::did_you_mean(&r.name, names.keys().copied()) {
                    Some(near) => d.help(format!("did you mean `{near}`?")),
                    None => {
                        d.help("`after=` names tasks defined with `task NAME` in the same workflow")
                    }
                };
                errors.push(Located {
                    file: Some(after.file),
                    diagnostic: d,
                });
                continue;
            };
            let target = specs[target_spec].template;
            let mut resolver = Resolver::new(workflow, target);
            if let Err(d) = resolver.check_arity(&r) {
                errors.push(Located {
                    file: Some(after.file),
                    diagnostic: d,
                });
                continue;
            }
            let constant = r.selector.iter().flatten().flatten().all(Text::is_constant);
            let mut shared: Option<Vec<u32>> = None;
            for task in own.clone() {
                let index = workflow.task(TaskId(task)).index;
                let found = if constant {
                    if shared.is_none() {
                        shared = Some(resolver.resolve(&r, template, index));
                    }
                    shared.clone().unwrap_or_default()
                } else {
                    resolver.resolve(&r, template, index)
                };
                if found.is_empty() {
                    let mut selector = String::new();
                    if let Some(sel) = &r.selector {
                        let parts: Vec<String> = sel
                            .iter()
                            .map(|s| {
                                s.as_ref()
                                    .map_or("*".to_owned(), |t| template.render(t, index))
                            })
                            .collect();
                        selector = format!("[{}]", parts.join(","));
                    }
                    let target_t = workflow.template(target);
                    let ranges: Vec<String> = target_t.sweep.iter().map(describe_values).collect();
                    errors.push(Located {
                        file: Some(after.file),
                        diagnostic: Diagnostic::new(
                            "slurp::unknown_dependency",
                            format!(
                                "no task `{}{selector}` (needed by `{}`)",
                                r.name,
                                workflow.task_name(TaskId(task))
                            ),
                        )
                        .label(r.span, "matches no instance")
                        .help(format!(
                            "`{}` has {}",
                            r.name,
                            ranges.join(" × ")
                        )),
                    });
                    break;
                }
                edges.extend(found.into_iter().map(|dep| (dep, task)));
            }
        }
    }

    edges.sort_unstable();
    edges.dedup();
    edges
}

/// Splits `a,b[1,2],c[*]` at the commas outside brackets.
fn parse_refs(
    text: &str,
    span: Span,
    vars: &[&str],
    substitute: bool,
) -> Result<Vec<Ref>, Diagnostic> {
    let exact = span.len() == text.len();
    let at = |from: usize, to: usize| if exact { span.sub(from, to) } else { span };
    let mut refs = Vec::new();
    let mut depth = 0i32;
    let mut start = 0;
    let bytes = text.as_bytes();
    for i in 0..=bytes.len() {
        let c = bytes.get(i).copied();
        match c {
            Some(b'[') => depth += 1,
            Some(b']') => depth -= 1,
            Some(b',') if depth == 0 => {}
            None => {}
            _ => continue,
        }
        if c.is_some() && c != Some(b',') {
            continue;
        }
        let item = &text[start..i];
        let item_span = at(start, i);
        if item.is_empty() {
            return Err(Diagnostic::new("slurp::syntax", "empty name in `after=`")
                .label(
                    at(start, (start + 1).min(text.len())),
                    "expected a task name here",
                )
                .help("list tasks separated by single commas: `after=prep,sim[*]`"));
        }
        if depth != 0 || item.matches('[').count() != item.matches(']').count() {
            return Err(Diagnostic::new(
                "slurp::syntax",
                format!("unbalanced brackets in `{item}`"),
            )
            .label(item_span, "brackets do not match")
            .help("select instances as `name[value]` or `name[v1,v2]`"));
        }
        let (name, selector) = match item.split_once('[') {
            Some((name, rest)) => {
                let Some(inner) = rest.strip_suffix(']') else {
                    return Err(Diagnostic::new(
                        "slurp::syntax",
                        format!("text after `]` in `{item}`"),
                    )
                    .label(item_span, "expected the reference to end with `]`"));
                };
                let inner_start = start + name.len() + 1;
                let mut parts = Vec::new();
                let mut offset = inner_start;
                for part in inner.split(',') {
                    parts.push(if part == "*" {
                        None
                    } else {
                        Some(crate::lower::compile_text(
                            part,
                            at(offset, offset + part.len()),
                            vars,
                            substitute,
                        )?)
                    });
                    offset += part.len() + 1;
                }
                // `name[*]` means every instance, whatever the variables.
                if parts.len() == 1 && parts[0].is_none() {
                    (name, None)
                } else {
                    (name, Some(parts))
                }
            }
            None => (item, None),
        };
        refs.push(Ref {
            name: name.to_owned(),
            selector,
            span: item_span,
        });
        start = i + 1;
    }
    Ok(refs)
}

/// Finds instances of one target template by selector.
struct Resolver<'w> {
    target: &'w Template,
    first: u32,
    /// Value → position maps for long lists, built on first use.
    lookup: Vec<Option<HashMap<Box<str>, u64>>>,
}

impl<'w> Resolver<'w> {
    fn new(workflow: &'w Workflow, target: TemplateId) -> Self {
        let t = workflow.template(target);
        Resolver {
            target: t,
            first: tasks_of(workflow, target).start,
            lookup: vec![None; t.sweep.len()],
        }
    }

    fn check_arity(&self, r: &Ref) -> Result<(), Diagnostic> {
        let Some(selector) = &r.selector else {
            return Ok(());
        };
        let axes = &self.target.sweep;
        if axes.is_empty() {
            return Err(Diagnostic::new(
                "slurp::ambiguous_dependency",
                format!("`{}` is not a sweep", r.name),
            )
            .label(r.span, "selects an instance of a single task")
            .help(format!("write `after={}`", r.name)));
        }
        if selector.len() != axes.len() {
            let names: Vec<&str> = axes.iter().map(|a| &*a.name).collect();
            let example: Vec<&str> = names.iter().map(|_| "*").collect();
            return Err(Diagnostic::new(
                "slurp::ambiguous_dependency",
                format!(
                    "`{}` gives {} value(s) but `{}` sweeps over {} variables ({})",
                    r.name,
                    selector.len(),
                    r.name,
                    axes.len(),
                    names.join(", ")
                ),
            )
            .label(r.span, "does not name one instance")
            .help(format!(
                "give one value per variable, `*` for any: `{}[{}]`",
                r.name,
                example.join(",")
            )));
        }
        Ok(())
    }

    /// The task indices (in the workflow) the reference selects for the
    /// dependent instance `index` of `own`.
    fn resolve(&mut self, r: &Ref, own: &Template, index: u32) -> Vec<u32> {
        let axes = &self.target.sweep;
        let total = self.target.len() as u32;
        let Some(selector) = &r.selector else {
            return (self.first..self.first + total).collect();
        };
        // Per axis, the positions allowed.
        let mut allowed: Vec<Vec<u64>> = Vec::with_capacity(axes.len());
        for (k, (axis, sel)) in axes.iter().zip(selector).enumerate() {
            match sel {
                None => allowed.push((0..axis.values.len()).collect()),
                Some(text) => {
                    let value = own.render(text, index);
                    let position = if axis.values.len() > 32
                        && matches!(axis.values, slurp_runtime::Values::List(_))
                    {
                        let map = self.lookup[k].get_or_insert_with(|| {
                            let mut m = HashMap::new();
                            let mut s = String::new();
                            for p in 0..axis.values.len() {
                                s.clear();
                                axis.values.value(p, &mut s);
                                m.entry(s.as_str().into()).or_insert(p);
                            }
                            m
                        });
                        map.get(value.as_str()).copied()
                    } else {
                        axis.values.position(&value)
                    };
                    match position {
                        Some(p) => allowed.push(vec![p]),
                        None => return Vec::new(),
                    }
                }
            }
        }
        // Cartesian product of allowed positions → mixed-radix index.
        let mut out = Vec::new();
        let mut cursor = vec![0usize; axes.len()];
        loop {
            let mut flat = 0u64;
            for (k, axis) in axes.iter().enumerate() {
                flat = flat * axis.values.len() + allowed[k][cursor[k]];
            }
            out.push(self.first + flat as u32);
            let mut k = axes.len();
            loop {
                if k == 0 {
                    return out;
                }
                k -= 1;
                cursor[k] += 1;
                if cursor[k] < allowed[k].len() {
                    break;
                }
                cursor[k] = 0;
            }
        }
    }
}

fn describe_values(axis: &slurp_runtime::Axis) -> String {
    match &axis.values {
        slurp_runtime::Values::Range { start, end, step } if *step == 1 => {
            format!("{}={start}..{end}", axis.name)
        }
        slurp_runtime::Values::Range { start, end, step } => {
            format!("{}={start}..{end}:{step}", axis.name)
        }
        slurp_runtime::Values::List(values) if values.len() <= 8 => {
            format!("{}={}", axis.name, values.join(","))
        }
        slurp_runtime::Values::List(values) => format!(
            "{}= {} values ({}, …)",
            axis.name,
            values.len(),
            values[..3].join(",")
        ),
        slurp_runtime::Values::Table { width, .. } => format!(
            "{}= {} rows of {width} linked values",
            axis.name,
            axis.values.len()
        ),
    }
}

/// Finds the shortest cycle through `start` and reports it as task ids.
fn report_cycle(workflow: &Workflow, start: u32, specs: &[DepSpec]) -> Located {
    // Walk "waits for" (incoming) edges back to the start.
    let mut parent: HashMap<u32, u32> = HashMap::new();
    let mut queue = VecDeque::from([start]);
    let mut closing = None;
    'search: while let Some(node) = queue.pop_front() {
        for next in workflow
            .graph
            .neighbors_directed(node, petgraph::Direction::Incoming)
        {
            if next == start {
                closing = Some(node);
                break 'search;
            }
            if let std::collections::hash_map::Entry::Vacant(e) = parent.entry(next) {
                e.insert(node);
                queue.push_back(next);
            }
        }
    }
    let mut chain = vec![start];
    let mut node = closing.unwrap_or(start);
    let mut back = Vec::new();
    while node != start {
        back.push(node);
        node = parent[&node];
    }
    chain.extend(back.into_iter().rev());
    // Start the cycle at its earliest task, so the message is stable.
    let first = chain
        .iter()
        .enumerate()
        .min_by_key(|&(_, &n)| n)
        .map_or(0, |(i, _)| i);
    chain.rotate_left(first);
    let start = chain[0];
    chain.push(start);
    let names: Vec<String> = chain
        .iter()
        .map(|&n| workflow.task_name(TaskId(n)))
        .collect();

    let template_of = |&n: &u32| workflow.task(TaskId(n)).template;
    let first_spec = specs.iter().find(|s| s.template == template_of(&start));
    let file = first_spec.and_then(|s| s.after.as_ref().map(|a| a.file));
    let mut d = Diagnostic::new(
        "slurp::dependency_cycle",
        format!("dependency cycle: {}", names.join(" → ")),
    )
    .help("`a → b` means `a` waits for `b`; remove one `after=` of the cycle");
    let mut labelled = Vec::new();
    for n in &chain[..chain.len() - 1] {
        let t = template_of(n);
        if labelled.contains(&t) {
            continue;
        }
        labelled.push(t);
        if let Some(after) = specs
            .iter()
            .find(|s| s.template == t)
            .and_then(|s| s.after.as_ref())
            && Some(after.file) == file
        {
            d = d.label(
                after.span,
                format!("`{}` waits here", workflow.task_name(TaskId(*n))),
            );
        }
    }
    Located {
        file,
        diagnostic: d,
    }
}
