//! Kubernetes resource quantities (`500m`, `4Gi`, `1e9`) read into the host's
//! [`Resources`]: CPU in millicores, memory in bytes, GPUs as `nvidia.com/gpu` (or
//! `amd.com/gpu`, counted as the same kind). The contract has no other resource, so this
//! is the policy's view only: every other resource a pod asks for (extended resources,
//! MIG profiles, hugepages, ephemeral storage, pods per node) is left to kube-scheduler,
//! which binds. Owns only the arithmetic; unknown resource names are ignored.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use switchyard_core::Resources;

/// Extended resources counted as GPUs.
pub(crate) const GPU_RESOURCES: [&str; 2] = ["nvidia.com/gpu", "amd.com/gpu"];

/// The quantity as a plain number (`500m` -> 0.5, `4Gi` -> 4294967296), or `None` when
/// it is not a valid quantity.
pub(crate) fn parse(quantity: &str) -> Option<f64> {
    let q = quantity.trim();
    let split = q
        .find(|c: char| c.is_ascii_alphabetic() && c != 'e' && c != 'E')
        .unwrap_or(q.len());
    let (number, suffix) = q.split_at(split);
    let factor = match suffix {
        "" => 1.0,
        "n" => 1e-9,
        "u" => 1e-6,
        "m" => 1e-3,
        "k" => 1e3,
        "M" => 1e6,
        "G" => 1e9,
        "T" => 1e12,
        "P" => 1e15,
        "E" => 1e18,
        "Ki" => 1024.0,
        "Mi" => 1024.0_f64.powi(2),
        "Gi" => 1024.0_f64.powi(3),
        "Ti" => 1024.0_f64.powi(4),
        "Pi" => 1024.0_f64.powi(5),
        "Ei" => 1024.0_f64.powi(6),
        _ => return None,
    };
    let value: f64 = number.parse().ok()?;
    value.is_finite().then_some(value * factor)
}

/// CPU, memory and GPUs of a resource map (requests, allocatable, usage).
pub(crate) fn resources(map: &BTreeMap<String, Quantity>) -> Resources {
    let get = |name: &str| map.get(name).and_then(|q| parse(&q.0)).unwrap_or(0.0);
    Resources {
        cpu_millis: (get("cpu") * 1000.0).ceil() as u64,
        memory_bytes: get("memory").ceil() as u64,
        gpus: GPU_RESOURCES.iter().map(|g| get(g)).sum::<f64>() as u32,
    }
}

/// Millicores as a quantity string (`250m`).
pub(crate) fn cpu_millis(millis: u64) -> String {
    format!("{millis}m")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantities_in_every_suffix_read_as_plain_numbers() {
        assert_eq!(parse("500m"), Some(0.5));
        assert_eq!(parse("2"), Some(2.0));
        assert_eq!(parse("4Gi"), Some(4.0 * 1024.0 * 1024.0 * 1024.0));
        assert_eq!(parse("1e9"), Some(1e9));
        assert_eq!(parse("128974848"), Some(128974848.0));
        assert_eq!(parse("129M"), Some(129e6));
        assert_eq!(parse("12Zi"), None);
    }

    #[test]
    fn a_resource_map_counts_cpu_in_millis_and_gpus_of_both_vendors() {
        let map: BTreeMap<String, Quantity> = [
            ("cpu", "1500m"),
            ("memory", "2Gi"),
            ("nvidia.com/gpu", "2"),
            ("ephemeral-storage", "10Gi"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), Quantity(v.to_string())))
        .collect();
        assert_eq!(
            resources(&map),
            Resources {
                cpu_millis: 1500,
                memory_bytes: 2 << 30,
                gpus: 2
            }
        );
    }
}
