//! Sizes as people write them on a command line (`500MiB`, `2GiB`, `1GB`). A leaf: it
//! knows no command.

/// A size in bytes: a number, optionally followed by `KiB`, `MiB`, `GiB`, `TiB` (powers
/// of 1024) or `kB`, `MB`, `GB`, `TB` (powers of 1000).
pub(super) fn parse_size(text: &str) -> Result<u64, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let number: u64 = number
        .parse()
        .map_err(|_| format!("`{text}` is not a size: expected a whole number of bytes, optionally with a unit (500MiB, 2GiB, 1GB)"))?;
    let scale: u64 = match unit.trim() {
        "" | "B" => 1,
        "KiB" => 1 << 10,
        "MiB" => 1 << 20,
        "GiB" => 1 << 30,
        "TiB" => 1 << 40,
        "kB" | "KB" => 1_000,
        "MB" => 1_000_000,
        "GB" => 1_000_000_000,
        "TB" => 1_000_000_000_000,
        other => {
            return Err(format!(
                "unknown size unit `{other}`: use KiB, MiB, GiB, TiB (powers of 1024) or kB, MB, GB, TB"
            ));
        }
    };
    number
        .checked_mul(scale)
        .ok_or_else(|| format!("`{text}` is too large"))
}

#[cfg(test)]
mod tests {
    use super::parse_size;

    #[test]
    fn a_size_is_bytes_or_a_number_with_a_binary_or_decimal_unit() {
        assert_eq!(parse_size("512").unwrap(), 512);
        assert_eq!(parse_size("2GiB").unwrap(), 2 << 30);
        assert_eq!(parse_size("1GB").unwrap(), 1_000_000_000);
        assert!(
            parse_size("1 parsec")
                .unwrap_err()
                .contains("unknown size unit")
        );
        assert!(
            parse_size("99999999999TiB")
                .unwrap_err()
                .contains("too large")
        );
    }
}
