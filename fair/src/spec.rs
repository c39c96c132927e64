//! Naming the learned policy on the command line: `fair` (the model slurp
//! ships), `fair:MODEL.onnx`, either with `+easy` to backfill around the
//! task it chose while that waits.

use std::path::PathBuf;
use std::sync::Arc;

use crate::Model;

/// A `fair…` policy name, read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Spec {
    /// The model file; `None` for the shipped one.
    pub model: Option<PathBuf>,
    pub backfill: bool,
}

impl Spec {
    /// `None` when `name` is not a learned policy at all.
    pub fn parse(name: &str) -> Option<Result<Spec, String>> {
        let (body, backfill) = match name.strip_suffix("+easy") {
            Some(body) => (body, true),
            None => (name, false),
        };
        if body == "fair" {
            return Some(Ok(Spec {
                model: None,
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
                backfill: false
            })
        );
        assert_eq!(
            spec("fair:m.onnx+easy"),
            Some(Spec {
                model: Some("m.onnx".into()),
                backfill: true
            })
        );
        assert!(Spec::parse("fair:").unwrap().is_err());
    }
}
