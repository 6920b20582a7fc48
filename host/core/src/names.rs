//! Names that leave the host: a policy's name (it names state files, ConfigMaps, metric
//! labels and API paths) and the labels a policy puts on jobs (they become Kubernetes
//! object labels). Both follow Kubernetes' syntax, so a name that is valid here is valid
//! everywhere it goes, and two different valid names never map to the same file or
//! object.

/// The longest policy name: a DNS label.
const POLICY_NAME_MAX: usize = 63;

/// Checks a policy's name: a DNS label (RFC 1123): 1 to 63 lowercase letters, digits
/// and `-`, starting and ending with a letter or digit. The error says what is wrong.
pub fn check_policy_name(name: &str) -> Result<(), String> {
    let shown = shown(name);
    if name.is_empty() {
        return Err("a policy name cannot be empty".into());
    }
    if name.len() > POLICY_NAME_MAX {
        return Err(format!(
            "policy name {shown} is {} bytes long; at most {POLICY_NAME_MAX} are allowed",
            name.len()
        ));
    }
    if !name
        .bytes()
        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        || name.starts_with('-')
        || name.ends_with('-')
    {
        return Err(format!(
            "policy name {shown} is not a DNS label: use lowercase letters, digits and `-`, \
             starting and ending with a letter or digit"
        ));
    }
    Ok(())
}

/// The longest label name, and the longest label value (Kubernetes' limits).
const LABEL_NAME_MAX: usize = 63;
/// The longest prefix of a label key: a DNS subdomain.
const LABEL_PREFIX_MAX: usize = 253;

/// Checks a label key: an optional DNS-subdomain prefix and `/`, then a name of 1 to 63
/// characters, alphanumerics and `-`, `_`, `.`, starting and ending with an
/// alphanumeric (Kubernetes' qualified name).
pub fn check_label_key(key: &str) -> Result<(), String> {
    let (prefix, name) = match key.split_once('/') {
        Some((prefix, name)) => (Some(prefix), name),
        None => (None, key),
    };
    if let Some(prefix) = prefix {
        let valid = !prefix.is_empty()
            && prefix.len() <= LABEL_PREFIX_MAX
            && prefix
                .split('.')
                .all(|part| check_policy_name(part).is_ok());
        if !valid {
            return Err(format!(
                "label key {}: the prefix before `/` must be a DNS subdomain (lowercase \
                 letters, digits, `-` and `.`, at most {LABEL_PREFIX_MAX} bytes)",
                shown(key)
            ));
        }
    }
    if name.is_empty() || name.len() > LABEL_NAME_MAX || !label_chars(name) {
        return Err(format!(
            "label key {}: the name must be 1 to {LABEL_NAME_MAX} letters, digits, `-`, `_` \
             or `.`, starting and ending with a letter or digit",
            shown(key)
        ));
    }
    Ok(())
}

/// Checks a label value: empty, or up to 63 alphanumerics and `-`, `_`, `.`, starting
/// and ending with an alphanumeric.
pub fn check_label_value(value: &str) -> Result<(), String> {
    if value.is_empty() {
        return Ok(());
    }
    if value.len() > LABEL_NAME_MAX || !label_chars(value) {
        return Err(format!(
            "label value {}: use at most {LABEL_NAME_MAX} letters, digits, `-`, `_` or `.`, \
             starting and ending with a letter or digit",
            shown(value)
        ));
    }
    Ok(())
}

fn label_chars(text: &str) -> bool {
    let alnum = |b: u8| b.is_ascii_alphanumeric();
    text.bytes()
        .all(|b| alnum(b) || b == b'-' || b == b'_' || b == b'.')
        && text.bytes().next().is_some_and(alnum)
        && text.bytes().last().is_some_and(alnum)
}

/// `text` quoted for a message, control characters escaped and long text cut.
fn shown(text: &str) -> String {
    const MOST: usize = 80;
    let mut out: String = text
        .chars()
        .take(MOST)
        .collect::<String>()
        .escape_debug()
        .collect();
    if text.chars().count() > MOST {
        out.push_str("...");
    }
    format!("`{out}`")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn policy_names_are_dns_labels() {
        for good in [
            "default",
            "specon",
            "a",
            "my-policy-2",
            "0x",
            &"a".repeat(63),
        ] {
            assert!(check_policy_name(good).is_ok(), "{good} refused");
        }
        for bad in [
            "",
            "col.b",
            "col_b",
            "Upper",
            "-a",
            "a-",
            "a b",
            "evil\"} 1\n",
            &"a".repeat(64),
            "ünï",
        ] {
            assert!(check_policy_name(bad).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn label_keys_and_values_follow_kubernetes_syntax() {
        for good in ["category", "example.com/fine", "a_b.c-d", "A1"] {
            assert!(check_label_key(good).is_ok(), "{good} refused");
        }
        for bad in [
            "",
            "has space",
            "a/b/c",
            "nul\0byte",
            "line\nbreak",
            "-x",
            "/x",
            "x/",
            &"k".repeat(64),
        ] {
            assert!(check_label_key(bad).is_err(), "{bad:?} accepted");
        }
        for good in ["", "CC", "v1.2_x-y"] {
            assert!(check_label_value(good).is_ok(), "{good} refused");
        }
        for bad in ["bad value!", "-x", &"v".repeat(64)] {
            assert!(check_label_value(bad).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn a_hostile_name_is_shown_escaped_and_cut() {
        let message = check_policy_name(&format!("x\n{}", "y".repeat(500))).unwrap_err();
        assert!(!message.contains('\n'), "{message}");
        assert!(message.len() < 300, "{message}");
    }
}
