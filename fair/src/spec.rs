//! Naming the learned policy on the command line: `fair` (the model slurp
//! ships, fair-v1), `fair-v2` … `fair-v15` (built in too,
//! [`BUILT_IN`]), `fair:MODEL.onnx`, any with `+easy` to backfill around the
//! task it chose while that waits.

use std::borrow::Cow;
use std::path::PathBuf;
use std::sync::Arc;

use crate::{Model, ModelError};

/// The names of the models built into the binary.
pub const BUILT_IN: [&str; 15] = [
    "fair", "fair-v2", "fair-v3", "fair-v4", "fair-v5", "fair-v6", "fair-v7", "fair-v8", "fair-v9",
    "fair-v10", "fair-v11", "fair-v12", "fair-v13", "fair-v14", "fair-v15",
];

/// A policy error (an unknown name) with the learned policies' names added,
/// which the scheduler core that made it does not know.
pub fn naming_learned(error: impl std::fmt::Display) -> String {
    format!(
        "{error}; learned: {}, or fair:MODEL.onnx, each with an optional +easy",
        BUILT_IN.join(", ")
    )
}

/// A `fair…` policy name, read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Spec {
    pub model: Source,
    pub backfill: bool,
}

/// Where a learned policy's model comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// One of [`BUILT_IN`].
    BuiltIn(&'static str),
    File(PathBuf),
}

impl Source {
    /// A built-in model's name, else a file.
    pub fn of(name: &str) -> Source {
        match BUILT_IN.iter().find(|&&b| b == name) {
            Some(b) => Source::BuiltIn(b),
            None => Source::File(PathBuf::from(name)),
        }
    }

    /// The model's file as it is, not yet loaded: what `slurp policy
    /// shortlist` rewrites. A file that is not there and does not look like
    /// one (`fair-v10`) is told the built-in names.
    pub fn read(&self) -> Result<ModelFile, String> {
        match self {
            Source::File(path) => match std::fs::read(path) {
                Ok(bytes) => Ok(ModelFile {
                    name: path.clone(),
                    bytes: Cow::Owned(bytes),
                    normalisers: std::fs::read_to_string(crate::model::sidecar(path))
                        .ok()
                        .map(Cow::Owned),
                }),
                Err(e) => {
                    let e = ModelError::Unreadable {
                        path: path.clone(),
                        reason: e.to_string(),
                    };
                    Err(if path.extension().is_none() && !path.exists() {
                        format!("{e} (nor is it a built-in model: {})", BUILT_IN.join(", "))
                    } else {
                        e.to_string()
                    })
                }
            },
            Source::BuiltIn(name) => {
                let (bytes, normalisers, file) = crate::built_in_bytes(name)
                    .ok_or_else(|| format!("no built-in model `{name}`"))?;
                Ok(ModelFile {
                    name: PathBuf::from(format!("{file} (built in)")),
                    bytes: Cow::Borrowed(bytes),
                    normalisers: normalisers.map(Cow::Borrowed),
                })
            }
        }
    }

    /// Loads the model: what `--policy`, `slurp policy judge` and `slurp
    /// policy train --init` name.
    pub fn load(&self) -> Result<Model, String> {
        let file = self.read()?;
        file.load().map_err(|e| match self {
            Source::BuiltIn(name) => format!("the built-in `{name}` model: {e}"),
            Source::File(_) => e.to_string(),
        })
    }
}

/// A model's file, read but not loaded: its ONNX bytes, its normalisers'
/// JSON (v1 models only) and the name errors give it.
#[derive(Debug, Clone)]
pub struct ModelFile {
    pub name: PathBuf,
    pub bytes: Cow<'static, [u8]>,
    pub normalisers: Option<Cow<'static, str>>,
}

impl ModelFile {
    /// The model these bytes (or others, such as a rewrite of them) hold,
    /// with this file's name and normalisers.
    pub fn load_bytes(&self, bytes: &[u8]) -> Result<Model, ModelError> {
        Model::from_bytes(&self.name, bytes, self.normalisers.as_deref(), None)
    }

    /// The model this file holds.
    pub fn load(&self) -> Result<Model, ModelError> {
        self.load_bytes(&self.bytes)
    }
}

impl Spec {
    /// `None` when `name` is not a learned policy at all.
    pub fn parse(name: &str) -> Option<Result<Spec, String>> {
        let (body, backfill) = match name.strip_suffix("+easy") {
            Some(body) => (body, true),
            None => (name, false),
        };
        if let Source::BuiltIn(b) = Source::of(body) {
            return Some(Ok(Spec {
                model: Source::BuiltIn(b),
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
                model: Source::File(PathBuf::from(path)),
                backfill,
            })
        })
    }

    /// Loads the model it names.
    pub fn load(&self) -> Result<Arc<Model>, String> {
        self.model.load().map(Arc::new)
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
                model: Source::BuiltIn("fair"),
                backfill: false
            })
        );
        assert_eq!(
            spec("fair-v2+easy"),
            Some(Spec {
                model: Source::BuiltIn("fair-v2"),
                backfill: true
            })
        );
        assert_eq!(
            spec("fair-v3"),
            Some(Spec {
                model: Source::BuiltIn("fair-v3"),
                backfill: false
            })
        );
        assert_eq!(
            spec("fair-v4+easy"),
            Some(Spec {
                model: Source::BuiltIn("fair-v4"),
                backfill: true
            })
        );
        assert_eq!(
            spec("fair-v5+easy"),
            Some(Spec {
                model: Source::BuiltIn("fair-v5"),
                backfill: true
            })
        );
        assert_eq!(spec("fair-v99"), None, "not a name slurp knows");
        assert_eq!(
            spec("fair:m.onnx+easy"),
            Some(Spec {
                model: Source::File("m.onnx".into()),
                backfill: true
            })
        );
        // Every built-in name loads, and says which observation it sees.
        for name in BUILT_IN {
            let model = Spec::parse(name).unwrap().unwrap().load().unwrap();
            let sight = match name {
                "fair" => crate::Sight::V1,
                "fair-v2" => crate::Sight::V2,
                "fair-v3" => crate::Sight::V3,
                _ => crate::Sight::V4,
            };
            assert_eq!(model.sight, sight, "{name}");
        }
        assert!(Spec::parse("fair:").unwrap().is_err());
        assert!(naming_learned("unknown policy `fair-v99`").ends_with(
            "; learned: fair, fair-v2, fair-v3, fair-v4, fair-v5, fair-v6, fair-v7, fair-v8, fair-v9, fair-v10, fair-v11, fair-v12, fair-v13, fair-v14, fair-v15, or fair:MODEL.onnx, each with an optional +easy"
        ));
    }
}
