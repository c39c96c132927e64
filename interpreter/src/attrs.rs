//! Attribute names and the typed values they take.
//!
//! One table ([`KEYS`]) says which attributes exist, so `did you mean` and
//! the language reference cannot drift apart. The value parsers take text
//! (after `{var}` substitution) and return a value or a message fit for a
//! diagnostic's label.

/// Every attribute a task head, a `defaults` line or a TOML task accepts.
pub const KEYS: &[&str] = &[
    "ntasks", "cores", "gpus", "mem", "nodes", "time", "after", "env", "cwd", "retries", "policy",
    "output", "pmi", "launcher",
];

/// The policy names a nested instance may use.
pub const POLICIES: &[&str] = &[
    "fcfs",
    "sjf",
    "easy",
    "conservative",
    "f1",
    "wfp3",
    "unicep",
    "fairshare",
    // The learned models built into slurp (`slurp_fair::spec::BUILT_IN`,
    // which a test in the slurp crate holds this list to).
    "fair",
    "fair-v2",
    "fair-v3",
    "fair-v4",
    "fair-v5",
    "fair-v6",
    "fair-v7",
    "fair-v8",
    "fair-v9",
    "fair-v10",
    "fair-v11",
    "fair-v12",
    "fair-v13",
    "fair-v14",
    "fair-v15",
];

/// The closest known name to a misspelt one, if any is close.
pub fn did_you_mean<'a>(
    unknown: &str,
    known: impl IntoIterator<Item = &'a str>,
) -> Option<&'a str> {
    known
        .into_iter()
        .map(|k| (strsim::jaro_winkler(unknown, k), k))
        .filter(|(score, _)| *score > 0.8)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, k)| k)
}

/// A whole number ≥ `min`.
pub fn parse_count(text: &str, min: u32) -> Result<u32, String> {
    match text.parse::<u32>() {
        Ok(n) if n >= min => Ok(n),
        Ok(n) => Err(format!("must be at least {min}, got {n}")),
        Err(_) if text.starts_with('-') => Err(format!("must be at least {min}")),
        Err(_) => Err(format!("`{text}` is not a whole number")),
    }
}

/// `512M`, `2G`, `1.5GiB`, `64KB`, `4096B`, `0`. Units are binary (K = 1024).
pub fn parse_size(text: &str) -> Result<u64, String> {
    if text == "0" {
        return Ok(0);
    }
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .ok_or_else(|| format!("`{text}` has no unit"))?;
    let (number, unit) = text.split_at(split);
    let shift = match unit.trim_end_matches("iB").trim_end_matches('B') {
        "" if unit == "B" => 0,
        "K" | "k" => 10,
        "M" => 20,
        "G" => 30,
        "T" => 40,
        _ => return Err(format!("unknown size unit `{unit}`")),
    };
    let value: f64 = number
        .parse()
        .map_err(|_| format!("`{number}` is not a number"))?;
    let bytes = value * (1u64 << shift) as f64;
    if !bytes.is_finite() || bytes >= u64::MAX as f64 {
        return Err(format!("`{text}` is too large"));
    }
    Ok(bytes.round() as u64)
}

/// The smallest `mem=` a task may ask for: it is a hard limit, and a
/// process needs about this much to start at all.
pub const MIN_MEM: u64 = 1 << 20;

/// A task's `mem=`: a size, 0 (no limit), or at least [`MIN_MEM`].
pub fn parse_mem(text: &str) -> Result<u64, String> {
    let bytes = parse_size(text)?;
    if bytes > 0 && bytes < MIN_MEM {
        return Err(format!(
            "`{text}` is less than a process needs to start; `mem` is a hard limit, at least 1M"
        ));
    }
    Ok(bytes)
}

/// A time limit in seconds: `90s`, `10m`, `1h30m`, `2d`, `1:30:00`,
/// `30:00`, `2-12:00:00`; `0` or `unlimited` mean no limit (`None`).
pub fn parse_duration(text: &str) -> Result<Option<u64>, String> {
    let secs = unbounded_duration(text)?;
    match secs {
        Some(s) if s > MAX_DURATION => Err(format!(
            "`{text}` is longer than 100 years, the longest a duration may be"
        )),
        _ => Ok(secs),
    }
}

/// 100 years, in seconds: the longest limit or grace slurp takes (a clock
/// plus far more overflows).
pub const MAX_DURATION: u64 = 100 * 365 * 86_400;

fn unbounded_duration(text: &str) -> Result<Option<u64>, String> {
    if text == "0" || text == "unlimited" {
        return Ok(None);
    }
    if text.contains(':') {
        return parse_clock(text).map(Some);
    }
    if text.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!("`{text}` has no unit"));
    }
    let mut total: u64 = 0;
    let mut number = String::new();
    let mut last_unit = u64::MAX;
    for c in text.chars() {
        if c.is_ascii_digit() {
            number.push(c);
            continue;
        }
        let unit = match c {
            's' => 1,
            'm' => 60,
            'h' => 3600,
            'd' => 86400,
            _ => return Err(format!("unknown time unit `{c}`")),
        };
        if number.is_empty() {
            return Err(format!("`{c}` needs a number before it"));
        }
        if unit >= last_unit {
            return Err("units must go from large to small, as in `1h30m`".to_owned());
        }
        last_unit = unit;
        let n: u64 = number
            .parse()
            .map_err(|_| format!("`{number}` is too large"))?;
        total = n
            .checked_mul(unit)
            .and_then(|s| total.checked_add(s))
            .ok_or_else(|| format!("`{text}` is too long"))?;
        number.clear();
    }
    if !number.is_empty() {
        return Err(format!("`{number}` at the end has no unit"));
    }
    Ok((total > 0).then_some(total))
}

/// `[D-]H:MM:SS` or `MM:SS`.
fn parse_clock(text: &str) -> Result<u64, String> {
    let (days, clock) = match text.split_once('-') {
        Some((d, rest)) => (
            d.parse::<u64>()
                .map_err(|_| format!("`{d}` is not a number of days"))?,
            rest,
        ),
        None => (0, text),
    };
    let parts: Vec<&str> = clock.split(':').collect();
    let numbers: Result<Vec<u64>, _> = parts.iter().map(|p| p.parse::<u64>()).collect();
    let numbers = numbers.map_err(|_| format!("`{text}` is not a clock time like `1:30:00`"))?;
    let too_long = || format!("`{text}` is too long");
    let seconds = match numbers[..] {
        [m, s] if s < 60 => m.checked_mul(60).and_then(|x| x.checked_add(s)),
        [h, m, s] if m < 60 && s < 60 => {
            h.checked_mul(3600).and_then(|x| x.checked_add(m * 60 + s))
        }
        _ => return Err(format!("`{text}` is not a clock time like `1:30:00`")),
    }
    .ok_or_else(too_long)?;
    days.checked_mul(86400)
        .and_then(|d| d.checked_add(seconds))
        .ok_or_else(too_long)
}

/// Splits `A=1,B=x,y` into `[("A","1"), ("B","x,y")]`: a comma starts a new
/// variable only when `NAME=` follows it, so values may contain commas.
pub fn parse_env(text: &str) -> Result<Vec<(&str, &str)>, String> {
    let mut starts = vec![0];
    for (i, _) in text.match_indices(',') {
        let rest = &text[i + 1..];
        if let Some((name, _)) = rest.split_once('=')
            && slurp_grammar::is_identifier(name)
        {
            starts.push(i + 1);
        }
    }
    starts.push(text.len() + 1);
    starts
        .windows(2)
        .map(|w| {
            let entry = &text[w[0]..w[1] - 1];
            match entry.split_once('=') {
                Some((name, value)) if slurp_grammar::is_identifier(name) => Ok((name, value)),
                _ => Err(format!("`{entry}` is not `NAME=value`")),
            }
        })
        .collect()
}

/// `fcfs`, `easy`, `sjf+easy`, `f1+conservative`, …, or `fair:PATH.onnx`.
pub fn parse_policy(text: &str) -> Result<(), String> {
    let (name, model) = match text.split_once(':') {
        Some((name, model)) => (name, Some(model)),
        None => (text, None),
    };
    let (order, backfill) = match name.split_once('+') {
        Some((order, backfill)) => (order, Some(backfill)),
        None => (name, None),
    };
    let backfill_ok = backfill.is_none_or(|b| {
        matches!(b, "easy" | "bf" | "conservative") && !matches!(order, "easy" | "conservative")
    });
    let model_ok = model.is_none() || order == "fair";
    if POLICIES.contains(&order) && backfill_ok && model_ok {
        Ok(())
    } else {
        Err(format!("unknown policy `{text}`"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_in_every_documented_form() {
        assert_eq!(parse_duration("90s"), Ok(Some(90)));
        assert_eq!(parse_duration("10m"), Ok(Some(600)));
        assert_eq!(parse_duration("1h30m"), Ok(Some(5400)));
        assert_eq!(parse_duration("2d"), Ok(Some(172_800)));
        assert_eq!(parse_duration("1:30:00"), Ok(Some(5400)));
        assert_eq!(parse_duration("30:00"), Ok(Some(1800)));
        assert_eq!(parse_duration("2-12:00:00"), Ok(Some(216_000)));
        assert_eq!(parse_duration("0"), Ok(None));
        assert!(parse_duration("90").unwrap_err().contains("no unit"));
        assert!(parse_duration("1m1h").is_err());
        assert!(parse_duration("1:75:00").is_err());
        assert!(parse_duration("10x").is_err());
    }

    #[test]
    fn sizes_are_binary() {
        assert_eq!(parse_size("2G"), Ok(2 << 30));
        assert_eq!(parse_size("512M"), Ok(512 << 20));
        assert_eq!(parse_size("1.5GiB"), Ok(1536 << 20));
        assert_eq!(parse_size("64KB"), Ok(64 << 10));
        assert_eq!(parse_size("0"), Ok(0));
        assert!(parse_size("2").unwrap_err().contains("no unit"));
        assert!(parse_size("2X").is_err());
    }

    #[test]
    fn env_splits_only_before_a_name() {
        assert_eq!(parse_env("A=1,B=2"), Ok(vec![("A", "1"), ("B", "2")]));
        assert_eq!(parse_env("A=x,y,B=2"), Ok(vec![("A", "x,y"), ("B", "2")]));
        assert_eq!(parse_env("PATH=/a:/b"), Ok(vec![("PATH", "/a:/b")]));
        assert!(parse_env("nope").is_err());
    }

    #[test]
    fn suggestions_for_near_misses_only() {
        assert_eq!(did_you_mean("core", KEYS.iter().copied()), Some("cores"));
        assert_eq!(did_you_mean("retry", KEYS.iter().copied()), Some("retries"));
        assert_eq!(did_you_mean("zzz", KEYS.iter().copied()), None);
    }

    #[test]
    fn durations_are_bounded() {
        assert_eq!(parse_duration("1h30m"), Ok(Some(5400)));
        assert_eq!(parse_duration("36500d"), Ok(Some(36500 * 86400)));
        for huge in [
            "110000000000000d",
            "36501d",
            "99999999999999:00:00",
            "9999999999999999-1:00:00",
        ] {
            let e = parse_duration(huge).unwrap_err();
            assert!(
                e.contains("100 years") || e.contains("too long"),
                "{huge}: {e}"
            );
        }
    }

    #[test]
    fn counts_and_policies() {
        assert_eq!(parse_count("4", 1), Ok(4));
        assert!(parse_count("0", 1).is_err());
        assert!(parse_count("x", 1).is_err());
        assert!(parse_policy("fair:/m/x.onnx").is_ok());
        assert!(parse_policy("easy").is_ok());
        assert!(parse_policy("eazy").is_err());
        assert!(parse_policy("sjf+easy").is_ok());
        assert!(parse_policy("wfp3+conservative").is_ok());
        assert!(parse_policy("fairshare+easy").is_ok());
        assert!(parse_policy("fair-v5+easy").is_ok());
        assert!(parse_policy("fair-v5:/m.onnx").is_err());
        assert!(parse_policy("fairshare:/m.onnx").is_err());
        assert!(parse_policy("sjf+eazy").is_err());
        assert!(parse_policy("easy+easy").is_err());
        assert!(parse_policy("sjf:/m.onnx").is_err());
    }
}
