//! Naming the learned policy on the command line: `fair` (the model slurp
//! ships, fair-v1), `fair-v2` (built in too), `fair:MODEL.onnx`, any with
//! `+easy` to backfill around the task it chose while that waits.

use std::path::PathBuf;
use std::sync::Arc;

use crate::Model;

/// A `fair…` policy name, read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Spec {
    /// The model file; `None` for a built-in one.
    pub model: Option<PathBuf>,
    /// The built-in `fair-v2` rather than `fair` (fair-v1).
    pub v2: bool,
    pub backfill: bool,
}

impl Spec {
    /// `None` when `name` is not a learned policy at all.
    pub fn parse(name: &str) -> Option<Result<Spec, String>> {
        let (body, backfill) = match name.strip_suffix("+easy") {
            Some(body) => (body, true),
            None => (name, false),
        };
        if body == "fair" || body == "fair-v2" {
            return Some(Ok(Spec {
                model: None,
                v2: body == "fair-v2",
                backfill,
            }));
        }
        let path = body.strip_prefix("fair:")?;
        Some(if path.is_empty() {
            Err(format!(
                "policy `{name}`: give the model after the colon, `fair:MODEL.onnx`"
            ))
        } else {
            Ok(Spec {
                model: Some(PathBuf::from(path)),
                v2: false,
                backfill,
            })
        })
    }

    /// Loads the model it names.
    pub fn load(&self) -> Result<Arc<Model>, String> {
        match &self.model {
            Some(path) => Model::load(path, None)
                .map(Arc::new)
                .map_err(|e| e.to_string()),
            None if self.v2 => crate::shipped_v2()
                .map(Arc::new)
                .map_err(|e| format!("the built-in `fair-v2` model: {e}")),
            None => crate::shipped()
                .map(Arc::new)
                .map_err(|e| format!("the shipped `fair` model: {e}")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_forms() {
        let spec = |name| Spec::parse(name).map(|r| r.unwrap());
        assert_eq!(spec("fcfs"), None);
        assert_eq!(spec("fairly"), None);
        assert_eq!(
            spec("fair"),
            Some(Spec {
                model: None,
                v2: false,
                backfill: false
            })
        );
        assert_eq!(
            spec("fair-v2+easy"),
            Some(Spec {
                model: None,
                v2: true,
                backfill: true
            })
        );
        assert_eq!(
            spec("fair:m.onnx+easy"),
            Some(Spec {
                model: Some("m.onnx".into()),
                v2: false,
                backfill: true
            })
        );
        assert!(Spec::parse("fair:").unwrap().is_err());
    }
}
