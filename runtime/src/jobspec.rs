//! Flux RFC 25 jobspec version 1, as a real flux-core accepts it.
//!
//! A task's jobspec is what `flux submit --dry-run` prints for the same
//! request: `-n ntasks -c cores -g gpus [-N nodes]` gives one `slot` labelled
//! `task` per copy, holding `core` (and `gpu`), inside a `node` when a node
//! count is set. flux-core is stricter than the RFC's schema, and so are
//! these types: `command` is always an argv array, `attributes.system.duration`
//! is always present (0 = unlimited), every count is ≥ 1, and `attributes`
//! holds only `system` and `user`. slurp's own data (task id, source line,
//! dependencies by slurp name, memory, retries) lives under
//! `attributes.user.slurp`; a Flux backend turns the dependencies into
//! `system.dependencies` once it knows the Flux job ids.
//!
//! `environment` holds only the task's own variables; like `flux submit`, a
//! backend adds the submitting environment when it submits.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::ir::{Program, TaskId, WorkflowId};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Jobspec {
    pub resources: Vec<Resource>,
    pub tasks: Vec<JobTask>,
    pub attributes: Attributes,
    pub version: u32,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Resource {
    #[serde(rename = "type")]
    pub kind: ResourceType,
    pub count: u32,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub with: Vec<Resource>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exclusive: Option<bool>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ResourceType {
    Node,
    Slot,
    Core,
    Gpu,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JobTask {
    pub command: Vec<String>,
    pub slot: String,
    pub count: TaskCount,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TaskCount {
    /// One task per slot (the usual case).
    PerSlot(u32),
    /// Exactly this many tasks, when they do not divide evenly over nodes.
    Total(u32),
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Attributes {
    pub system: System,
    pub user: User,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct System {
    /// Seconds; 0 means unlimited.
    pub duration: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub environment: BTreeMap<String, String>,
    pub job: JobName,
    /// Job-shell options (output files, one task per node for nested
    /// instances), as flux-core's own front ends write them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shell: Option<serde_json::Value>,
    /// RFC 26 dependencies on other Flux jobs; absent when there are none
    /// (the RFC forbids an empty array). Filled in by the Flux backend.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dependencies: Vec<Dependency>,
    /// The queue to run in (`flux submit --queue`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue: Option<String>,
}

/// One RFC 26 dependency: `{"scheme": "afterok", "value": JOBID}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Dependency {
    pub scheme: String,
    pub value: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JobName {
    pub name: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct User {
    pub slurp: SlurpMeta,
}

/// slurp's own data about a task.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SlurpMeta {
    /// The task id (`sim[17]`).
    pub id: String,
    /// Source file and 1-based line.
    pub file: String,
    pub line: u32,
    /// `task`, `legacy`, `plain` or `toml`.
    pub kind: String,
    /// Ids of the tasks this one runs after (afterok).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub after: Vec<String>,
    /// Bytes per copy; absent when none is reserved.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mem: Option<u64>,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub retries: u32,
    /// True when the command runs through `/bin/sh -c`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub shell: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nested: Option<NestedMeta>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NestedMeta {
    /// The child workflow file, absolute.
    pub workflow: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<String>,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

impl Program {
    /// Renders the jobspec of one task. `cwd` is the directory relative
    /// working directories resolve against (where slurp was started).
    pub fn jobspec(&self, workflow: WorkflowId, id: TaskId, cwd: &str) -> Jobspec {
        let wf = self.workflow(workflow);
        let task = wf.task(id);
        let template = wf.template(task.template);
        let request = task.request;

        let mut slot_with = vec![leaf(ResourceType::Core, request.cores)];
        if request.gpus > 0 {
            slot_with.push(leaf(ResourceType::Gpu, request.gpus));
        }
        // As flux-core's `from_command`: with a node count, slots per node
        // are rounded up and an uneven split counts tasks in total.
        let (resources, count) = if request.nodes > 0 {
            let per_node = request.ntasks.div_ceil(request.nodes);
            let count = if request.ntasks.is_multiple_of(request.nodes) {
                TaskCount::PerSlot(1)
            } else {
                TaskCount::Total(request.ntasks)
            };
            let slot = slot(per_node, slot_with);
            (
                vec![Resource {
                    kind: ResourceType::Node,
                    count: request.nodes,
                    with: vec![slot],
                    label: None,
                    exclusive: None,
                }],
                count,
            )
        } else {
            (vec![slot(request.ntasks, slot_with)], TaskCount::PerSlot(1))
        };
        // Under a launcher one process starts the copies: one task over
        // every slot, not one per slot.
        let count = if wf.launcher(id).is_some() {
            TaskCount::Total(1)
        } else {
            count
        };

        let mut shell = serde_json::Map::new();
        if let Some(output) = wf.output(id) {
            // flux-core's `--output`: stderr follows stdout into the file.
            shell.insert(
                "output".into(),
                serde_json::json!({ "stdout": { "type": "file", "path": output } }),
            );
        }
        let nested = task.nested.map(|child| {
            // One slurp per node of the allocation, as `flux alloc` runs one
            // broker per node.
            shell.insert("per-resource".into(), serde_json::json!({ "type": "node" }));
            NestedMeta {
                workflow: self.file(self.workflow(child).file).display().to_string(),
                policy: template
                    .extras
                    .as_ref()
                    .and_then(|x| x.policy.as_deref())
                    .map(str::to_owned),
            }
        });

        let task_cwd = match wf.cwd(id) {
            Some(dir) if dir.starts_with('/') => dir,
            Some(dir) => format!("{}/{dir}", cwd.trim_end_matches('/')),
            None => cwd.to_owned(),
        };

        Jobspec {
            resources,
            tasks: vec![JobTask {
                command: wf.argv(id),
                slot: "task".to_owned(),
                count,
            }],
            attributes: Attributes {
                system: System {
                    duration: task.time_limit.map_or(0, |t| t.get()) as f64,
                    cwd: Some(task_cwd),
                    environment: wf.environment(id).into_iter().collect(),
                    job: JobName {
                        name: wf.task_name(id),
                    },
                    shell: (!shell.is_empty()).then(|| serde_json::json!({ "options": shell })),
                    dependencies: Vec::new(),
                    queue: None,
                },
                user: User {
                    slurp: SlurpMeta {
                        id: wf.task_name(id),
                        file: self.file(template.source.file).display().to_string(),
                        line: template.source.line,
                        kind: serde_json::to_value(template.kind)
                            .ok()
                            .and_then(|v| v.as_str().map(str::to_owned))
                            .unwrap_or_default(),
                        after: {
                            let mut deps: Vec<TaskId> = wf.dependencies(id).collect();
                            deps.sort();
                            deps.into_iter().map(|d| wf.task_name(d)).collect()
                        },
                        mem: (request.mem > 0).then_some(request.mem),
                        retries: task.retries,
                        shell: template.command.shell,
                        nested,
                    },
                },
            },
            version: 1,
        }
    }
}

fn leaf(kind: ResourceType, count: u32) -> Resource {
    Resource {
        kind,
        count,
        with: Vec::new(),
        label: None,
        exclusive: None,
    }
}

fn slot(count: u32, with: Vec<Resource>) -> Resource {
    Resource {
        kind: ResourceType::Slot,
        count,
        with,
        label: Some("task".to_owned()),
        exclusive: None,
    }
}
