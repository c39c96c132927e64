//! A Flux jobspec (RFC 25, version 1) submitted to a live instance, read
//! back into the one task line of the slurp language that means it — so it
//! is checked, lowered and journaled exactly as a line would be.
//!
//! What a jobspec can say and slurp maps: `node` (count) over a `slot`
//! (count) of `core` and `gpu`; one task over that slot, `per_slot: 1` or a
//! `total`; `attributes.system.duration` (seconds, 0 for none), `cwd`,
//! `environment`, `job.name`, and the `after` list slurp's own jobspecs carry
//! in `attributes.user.slurp` (Flux's `dependencies` name job ids, which
//! mean nothing here). Anything else in `resources` or `tasks` is
//! refused by name rather than dropped.

use serde_json::Value;

/// The task line for `jobspec`; `fallback` names it when its `job.name`
/// is absent or not a task name.
pub fn task_line(jobspec: &Value, fallback: &str) -> Result<String, String> {
    let object = jobspec.as_object().ok_or("a jobspec is a JSON object")?;
    match object.get("version").and_then(Value::as_u64) {
        Some(1) => {}
        Some(v) => return Err(format!("jobspec version {v}: slurp reads version 1")),
        None => return Err("the jobspec has no `version` (1)".to_owned()),
    }
    let resources = object
        .get("resources")
        .and_then(Value::as_array)
        .ok_or("the jobspec has no `resources` list")?;
    let [top] = resources.as_slice() else {
        return Err("`resources` must hold one entry: a `node` or a `slot`".to_owned());
    };
    let (nodes, slot) = match kind(top)? {
        "node" => {
            let with = children(top)?;
            let [slot] = with else {
                return Err("a `node` must hold one `slot`".to_owned());
            };
            (count(top)?, slot)
        }
        "slot" => (0, top),
        other => {
            return Err(format!(
                "resource `{other}` cannot lead `resources` here: `node` or `slot`"
            ));
        }
    };
    if kind(slot)? != "slot" {
        return Err("a `node` must hold a `slot`".to_owned());
    }
    let slots = count(slot)?;
    let (mut cores, mut gpus) = (0, 0);
    for leaf in children(slot)? {
        match kind(leaf)? {
            "core" => cores = count(leaf)?,
            "gpu" => gpus = count(leaf)?,
            other => {
                return Err(format!(
                    "a `slot` of `{other}` is not something slurp schedules (`core`, `gpu`)"
                ));
            }
        }
    }
    if cores == 0 {
        return Err("the `slot` holds no `core`".to_owned());
    }
    let tasks = object
        .get("tasks")
        .and_then(Value::as_array)
        .ok_or("the jobspec has no `tasks` list")?;
    let [task] = tasks.as_slice() else {
        return Err("`tasks` must hold one task".to_owned());
    };
    let command: Vec<&str> = task
        .get("command")
        .and_then(Value::as_array)
        .and_then(|words| words.iter().map(Value::as_str).collect::<Option<Vec<_>>>())
        .filter(|words| !words.is_empty())
        .ok_or("the task's `command` must be a non-empty list of strings")?;
    let per_node = slots.max(1) * nodes.max(1);
    let ntasks = match task.get("count") {
        Some(c) if c.get("per_slot").and_then(Value::as_u64) == Some(1) => per_node,
        Some(c) if c.get("total").is_some() => c["total"]
            .as_u64()
            .filter(|&n| n >= 1)
            .ok_or("`count.total` must be a whole number ≥ 1")?,
        _ => {
            return Err(
                "the task's `count` must be `{\"per_slot\": 1}` or `{\"total\": N}`".to_owned(),
            );
        }
    };
    let system = object
        .get("attributes")
        .and_then(|a| a.get("system"))
        .cloned()
        .unwrap_or(Value::Null);
    let name = system
        .get("job")
        .and_then(|j| j.get("name"))
        .and_then(Value::as_str)
        .filter(|n| is_task_name(n))
        .unwrap_or(fallback);
    let mut line = format!("task {name} ntasks={ntasks} cores={cores}");
    if gpus > 0 {
        line.push_str(&format!(" gpus={gpus}"));
    }
    if nodes > 0 {
        line.push_str(&format!(" nodes={nodes}"));
    }
    match system.get("duration") {
        None | Some(Value::Null) => {}
        Some(d) => {
            let secs = d
                .as_f64()
                .filter(|s| *s >= 0.0 && s.is_finite())
                .ok_or("`duration` must be a number of seconds")?;
            if secs > 0.0 {
                line.push_str(&format!(" time={}s", secs.ceil() as u64));
            }
        }
    }
    // What slurp's own jobspecs say a task waits for (`slurp jobspec`).
    let after = object
        .get("attributes")
        .and_then(|a| a.get("user"))
        .and_then(|u| u.get("slurp"))
        .and_then(|s| s.get("after"));
    if let Some(after) = after {
        let names: Vec<&str> = after
            .as_array()
            .and_then(|a| a.iter().map(Value::as_str).collect())
            .ok_or("`attributes.user.slurp.after` must be a list of task ids")?;
        if names.iter().any(|n| n.contains([' ', '\t', '"', '\n'])) {
            return Err("a task id in `after` has a blank or a quote".to_owned());
        }
        if !names.is_empty() {
            line.push_str(&format!(" after={}", names.join(",")));
        }
    }
    if let Some(cwd) = system.get("cwd") {
        let cwd = cwd.as_str().ok_or("`cwd` must be a string")?;
        line.push_str(&format!(" cwd={}", quoted(cwd)?));
    }
    if let Some(env) = system.get("environment") {
        let env = env.as_object().ok_or("`environment` must be an object")?;
        for (key, value) in env {
            let value = value
                .as_str()
                .ok_or_else(|| format!("environment `{key}` must be a string"))?;
            line.push_str(&format!(" env={}", quoted(&format!("{key}={value}"))?));
        }
    }
    line.push_str(": ");
    let words: Vec<String> = command
        .iter()
        .map(|w| shell_word(w))
        .collect::<Result<_, _>>()?;
    line.push_str(&words.join(" "));
    Ok(line)
}

fn kind(resource: &Value) -> Result<&str, String> {
    resource
        .get("type")
        .and_then(Value::as_str)
        .ok_or_else(|| "every resource has a `type`".to_owned())
}

fn count(resource: &Value) -> Result<u64, String> {
    resource
        .get("count")
        .and_then(Value::as_u64)
        .filter(|&n| n >= 1)
        .ok_or_else(|| {
            format!(
                "resource `{}` needs a `count` ≥ 1",
                kind(resource).unwrap_or("?")
            )
        })
}

fn children(resource: &Value) -> Result<&[Value], String> {
    resource
        .get("with")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .ok_or_else(|| {
            format!(
                "resource `{}` needs a `with` list",
                kind(resource).unwrap_or("?")
            )
        })
}

fn is_task_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
}

/// An attribute value in double quotes.
fn quoted(value: &str) -> Result<String, String> {
    if value.contains(['\n', '"', '\\']) {
        return Err(format!(
            "`{value}`: a newline, `\"` or `\\` cannot be carried in a task line's attribute"
        ));
    }
    Ok(format!("\"{value}\""))
}

/// One argv word, single-quoted when it needs to be, so the line is
/// exec'd as exactly these words.
fn shell_word(word: &str) -> Result<String, String> {
    if word.contains('\n') {
        return Err("a command word with a newline cannot be carried in a task line".to_owned());
    }
    let plain = !word.is_empty()
        && word
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_./=:,+@%".contains(&b));
    Ok(if plain {
        word.to_owned()
    } else {
        format!("'{}'", word.replace('\'', "'\\''"))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_flux_run_jobspec_reads_as_its_task_line() {
        let spec = json!({
            "version": 1,
            "resources": [{"type": "node", "count": 2, "with": [
                {"type": "slot", "count": 2, "label": "task", "with": [
                    {"type": "core", "count": 4}, {"type": "gpu", "count": 1}]}]}],
            "tasks": [{"command": ["./sim", "a b", "it's"], "slot": "task", "count": {"per_slot": 1}}],
            "attributes": {"system": {"duration": 90, "cwd": "/data",
                "environment": {"MODE": "fast"}, "job": {"name": "sim7"}},
                "user": {"slurp": {"after": ["prep", "fit[2]"]}}}
        });
        assert_eq!(
            task_line(&spec, "job1").unwrap(),
            "task sim7 ntasks=4 cores=4 gpus=1 nodes=2 time=90s after=prep,fit[2] cwd=\"/data\" env=\"MODE=fast\": ./sim 'a b' 'it'\\''s'"
        );
    }

    #[test]
    fn what_slurp_cannot_carry_is_refused_by_name() {
        let spec = |resources: Value| {
            json!({"version": 1, "resources": resources,
                "tasks": [{"command": ["true"], "slot": "task", "count": {"per_slot": 1}}]})
        };
        let err = task_line(
            &spec(json!([{"type": "slot", "count": 1, "with": [{"type": "memory", "count": 4}]}])),
            "j",
        )
        .unwrap_err();
        assert!(err.contains("`memory`"), "{err}");
        let err = task_line(&json!({"version": 2}), "j").unwrap_err();
        assert!(err.contains("version 2"), "{err}");
        let ok = task_line(
            &spec(json!([{"type": "slot", "count": 3, "with": [{"type": "core", "count": 1}]}])),
            "j",
        );
        assert_eq!(ok.unwrap(), "task j ntasks=3 cores=1: true");
    }
}
