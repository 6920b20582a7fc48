//! Which runs `simulate` makes: `--policy [NAME=]POLICY` and `--set NAME.key=value` read
//! into one named run each. A run is named by its alias or by the policy's own name, so
//! two settings of one policy compare side by side (`--policy dragon --policy
//! local=dragon --set local.scaling=false`), and two runs may never share a name: the
//! table, the plots and the decision traces (`decisions-NAME.jsonl`) are keyed by it.

use std::collections::BTreeMap;

use anyhow::{bail, ensure};

/// One run to make.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct RunSpec {
    /// The name in the table, the plots' legends and the trace's file name.
    pub name: String,
    /// The policy to load: a built-in name or a `.wasm` file.
    pub policy: String,
    /// Its parameters from `--set`.
    pub settings: BTreeMap<String, String>,
}

/// Longest run name: a DNS label's length, as the policies' own names.
const MAX_NAME: usize = 63;

/// Whether `name` can name a run: letters, digits, `-` and `_`, starting with a letter
/// or digit (so it is a file name, and the `.` of `--set NAME.key` is unambiguous).
fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_NAME
        && name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

/// Splits `--policy` into its alias (before a `=`) and the policy.
fn split_alias(argument: &str) -> anyhow::Result<(Option<&str>, &str)> {
    let Some((alias, policy)) = argument.split_once('=') else {
        return Ok((None, argument));
    };
    ensure!(
        valid_name(alias),
        "--policy {argument}: the name `{alias}` before `=` must be 1 to {MAX_NAME} letters, \
         digits, `-` or `_`, starting with a letter or digit"
    );
    ensure!(
        !policy.is_empty(),
        "--policy {argument}: no policy after `=` (write NAME=POLICY, e.g. local=dragon)"
    );
    Ok((Some(alias), policy))
}

/// The policy a `--policy` argument loads, alias or not (for the experiment modes, which
/// run one policy per arm and take no aliases' settings).
pub(crate) fn policy_of(argument: &str) -> anyhow::Result<&str> {
    Ok(split_alias(argument)?.1)
}

/// Reads the `--policy` and `--set` options into runs. `own_name` gives a policy's own
/// name (it loads the policy), used when no alias is given.
pub(crate) fn plan(
    policies: &[String],
    sets: &[String],
    mut own_name: impl FnMut(&str) -> anyhow::Result<String>,
) -> anyhow::Result<Vec<RunSpec>> {
    let mut runs: Vec<RunSpec> = Vec::with_capacity(policies.len());
    for argument in policies {
        let (alias, policy) = split_alias(argument)?;
        let name = match alias {
            Some(alias) => alias.to_string(),
            None => own_name(policy)?,
        };
        if let Some(earlier) = runs.iter().find(|r| r.name == name) {
            bail!(
                "two runs are named `{name}` (--policy {} and --policy {argument}): name each \
                 one, e.g. --policy {name} --policy {name}-2={policy}, and address their \
                 parameters as --set {name}-2.key=value",
                earlier.policy
            );
        }
        runs.push(RunSpec {
            name,
            policy: policy.to_string(),
            settings: BTreeMap::new(),
        });
    }
    for set in sets {
        let (index, key, value) = target_of(set, &runs)?;
        runs[index]
            .settings
            .insert(key.to_string(), value.to_string());
    }
    Ok(runs)
}

/// The run, parameter and value a `--set` names. The run is named by its name or by the
/// policy argument (a `.wasm` path, whose own dots are no trouble: the longest prefix
/// wins) when only that run loads it.
pub(crate) fn target_of<'a>(
    set: &'a str,
    runs: &[RunSpec],
) -> anyhow::Result<(usize, &'a str, &'a str)> {
    let Some((target, value)) = set.split_once('=') else {
        bail!("--set {set}: expected NAME.key=value");
    };
    let matched = runs
        .iter()
        .enumerate()
        .flat_map(|(i, run)| {
            let unique_policy = runs.iter().filter(|r| r.policy == run.policy).count() == 1;
            [
                Some(run.name.as_str()),
                unique_policy.then_some(run.policy.as_str()),
            ]
            .into_iter()
            .flatten()
            .map(move |prefix| (i, prefix))
        })
        .filter_map(|(i, prefix)| {
            let key = target.strip_prefix(prefix)?.strip_prefix('.')?;
            Some((prefix.len(), i, key))
        })
        .max_by_key(|(len, _, _)| *len);
    let Some((_, index, key)) = matched else {
        bail!(
            "--set {set} names no run (runs: {}); write NAME.key=value",
            runs.iter()
                .map(|r| if r.name == r.policy {
                    r.name.clone()
                } else {
                    format!("{} ({})", r.name, r.policy)
                })
                .collect::<Vec<_>>()
                .join(", ")
        );
    };
    if key.is_empty() {
        bail!(
            "--set {set}: the parameter name after `{}.` is empty",
            runs[index].name
        );
    }
    Ok((index, key, value))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(items: &[&str]) -> Vec<String> {
        items.iter().map(|s| s.to_string()).collect()
    }

    /// Names a policy as the built-ins and a file named `x.wasm` that calls itself `x`.
    fn own_name(policy: &str) -> anyhow::Result<String> {
        Ok(std::path::Path::new(policy)
            .file_stem()
            .unwrap()
            .to_string_lossy()
            .into_owned())
    }

    #[test]
    fn two_settings_of_one_policy_are_two_named_runs_with_their_own_parameters() {
        let runs = plan(
            &strings(&["dragon", "local=dragon"]),
            &strings(&["local.scaling=false"]),
            own_name,
        )
        .unwrap();
        assert_eq!(runs[0].name, "dragon");
        assert!(runs[0].settings.is_empty());
        assert_eq!(runs[1].name, "local");
        assert_eq!(runs[1].policy, "dragon");
        assert_eq!(runs[1].settings["scaling"], "false");
    }

    #[test]
    fn the_same_policy_twice_without_a_name_is_refused_with_a_way_out() {
        let error = plan(&strings(&["dragon", "dragon"]), &[], own_name)
            .unwrap_err()
            .to_string();
        assert!(error.contains("two runs are named `dragon`"), "{error}");
        assert!(error.contains("--policy dragon-2=dragon"), "{error}");
    }

    #[test]
    fn an_alias_may_not_repeat_a_policys_own_name() {
        let error = plan(&strings(&["even", "even=default"]), &[], own_name).unwrap_err();
        assert!(error.to_string().contains("two runs are named `even`"));
    }

    #[test]
    fn a_file_is_named_by_its_own_name_and_set_by_path_or_name() {
        let runs = plan(
            &strings(&["/tmp/v1.2/mine.wasm", "default"]),
            &strings(&["/tmp/v1.2/mine.wasm.alpha=1", "mine.beta=2"]),
            own_name,
        )
        .unwrap();
        assert_eq!(runs[0].name, "mine");
        assert_eq!(runs[0].settings["alpha"], "1");
        assert_eq!(runs[0].settings["beta"], "2");
    }

    #[test]
    fn a_set_for_no_run_lists_the_runs() {
        let error = plan(
            &strings(&["default", "b=even"]),
            &strings(&["dragon.x=1"]),
            own_name,
        )
        .unwrap_err()
        .to_string();
        assert!(
            error.contains("names no run (runs: default, b (even))"),
            "{error}"
        );
    }

    #[test]
    fn hostile_aliases_are_refused_by_name() {
        for bad in ["=even", "a.b=even", "../x=even", "-x=even", "x=", "é=even"] {
            let error = plan(&strings(&[bad]), &[], own_name)
                .unwrap_err()
                .to_string();
            assert!(
                error.starts_with(&format!("--policy {bad}:")),
                "{bad}: {error}"
            );
        }
        let long = format!("{}=even", "a".repeat(64));
        assert!(plan(&[long], &[], own_name).is_err());
    }

    #[test]
    fn a_set_with_an_empty_key_or_no_value_is_refused() {
        let policies = strings(&["even"]);
        assert!(plan(&policies, &strings(&["even.=1"]), own_name).is_err());
        assert!(plan(&policies, &strings(&["even.x"]), own_name).is_err());
    }
}
