//! Policy parameters: a spec with defaults and docs, checked once, read typed.
//!
//! The host hands the effective settings to every `decide` call, so a policy never
//! stores them; it resolves them against its spec each time (a few string compares).

use crate::{Parameter, Setting};

/// One parameter a policy accepts.
#[derive(Clone, Copy, Debug)]
pub struct ParamSpec {
    /// Name the operator writes (`alpha`, `interval`).
    pub name: &'static str,
    /// Value used when the operator sets nothing.
    pub default: &'static str,
    /// One sentence for `policy inspect`.
    pub doc: &'static str,
}

impl ParamSpec {
    /// The WIT form, for `describe`.
    pub fn to_parameter(&self) -> Parameter {
        Parameter {
            name: self.name.to_string(),
            default_value: self.default.to_string(),
            doc: self.doc.to_string(),
        }
    }
}

/// The WIT form of a whole spec, for `describe`.
pub fn parameters(spec: &[ParamSpec]) -> Vec<Parameter> {
    spec.iter().map(ParamSpec::to_parameter).collect()
}

/// Settings resolved against a spec: every parameter present, unknown names refused.
#[derive(Clone, Debug)]
pub struct Settings {
    values: Vec<(&'static str, String)>,
}

impl Settings {
    /// Fills defaults and refuses names the spec does not know, listing those it does.
    pub fn resolve(spec: &[ParamSpec], given: &[Setting]) -> Result<Self, String> {
        for setting in given {
            if !spec.iter().any(|p| p.name == setting.name) {
                let known: Vec<&str> = spec.iter().map(|p| p.name).collect();
                return Err(format!(
                    "unknown parameter `{}`; this policy accepts: {}",
                    setting.name,
                    if known.is_empty() {
                        "none".to_string()
                    } else {
                        known.join(", ")
                    }
                ));
            }
        }
        let values = spec
            .iter()
            .map(|p| {
                let value = given
                    .iter()
                    .rev()
                    .find(|s| s.name == p.name)
                    .map_or_else(|| p.default.to_string(), |s| s.value.trim().to_string());
                (p.name, value)
            })
            .collect();
        Ok(Self { values })
    }

    /// The effective settings in WIT form, for `configure`'s answer.
    pub fn to_settings(&self) -> Vec<Setting> {
        self.values
            .iter()
            .map(|(name, value)| Setting {
                name: name.to_string(),
                value: value.clone(),
            })
            .collect()
    }

    fn raw(&self, name: &str) -> &str {
        self.values
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v.as_str())
            .unwrap_or_else(|| panic!("parameter `{name}` is not in the policy's spec"))
    }

    /// A parameter as written (trimmed), for values the policy parses itself.
    pub fn text(&self, name: &str) -> &str {
        self.raw(name)
    }

    /// A floating-point parameter, finite.
    pub fn f64(&self, name: &str) -> Result<f64, String> {
        let raw = self.raw(name);
        match raw.parse::<f64>() {
            Ok(v) if v.is_finite() => Ok(v),
            _ => Err(format!("parameter `{name}` must be a number, got `{raw}`")),
        }
    }

    /// A floating-point parameter within `[min, max]`.
    pub fn f64_in(&self, name: &str, min: f64, max: f64) -> Result<f64, String> {
        let v = self.f64(name)?;
        if v < min || v > max {
            return Err(format!(
                "parameter `{name}` must be between {min} and {max}, got {v}"
            ));
        }
        Ok(v)
    }

    /// A boolean parameter (`true`/`false`).
    pub fn bool(&self, name: &str) -> Result<bool, String> {
        match self.raw(name) {
            "true" => Ok(true),
            "false" => Ok(false),
            raw => Err(format!(
                "parameter `{name}` must be true or false, got `{raw}`"
            )),
        }
    }

    /// A parameter that must be one of a fixed set of words.
    pub fn choice<'a>(&self, name: &str, allowed: &[&'a str]) -> Result<&'a str, String> {
        let raw = self.raw(name);
        allowed.iter().copied().find(|a| *a == raw).ok_or_else(|| {
            format!(
                "parameter `{name}` must be one of {}, got `{raw}`",
                allowed.join(", ")
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::setting;

    const SPEC: &[ParamSpec] = &[
        ParamSpec {
            name: "alpha",
            default: "0.01",
            doc: "threshold",
        },
        ParamSpec {
            name: "mode",
            default: "strict",
            doc: "mode",
        },
    ];

    #[test]
    fn defaults_fill_what_the_operator_left_out() {
        let s = Settings::resolve(SPEC, &[setting("mode", "loose")]).unwrap();
        assert_eq!(s.f64("alpha").unwrap(), 0.01);
        assert_eq!(s.choice("mode", &["strict", "loose"]).unwrap(), "loose");
    }

    #[test]
    fn an_unknown_name_is_refused_with_the_known_ones_listed() {
        let err = Settings::resolve(SPEC, &[setting("alhpa", "1")]).unwrap_err();
        assert!(
            err.contains("`alhpa`") && err.contains("alpha, mode"),
            "{err}"
        );
    }

    #[test]
    fn a_bad_number_names_the_parameter_and_the_value() {
        let s = Settings::resolve(SPEC, &[setting("alpha", "lots")]).unwrap();
        let err = s.f64("alpha").unwrap_err();
        assert!(err.contains("`alpha`") && err.contains("`lots`"), "{err}");
        let s = Settings::resolve(SPEC, &[setting("alpha", "2")]).unwrap();
        assert!(s.f64_in("alpha", 0.0, 1.0).is_err());
    }
}
