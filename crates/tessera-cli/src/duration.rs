//! Human durations for flags: `500ms`, `10s`, `1.5s`, `2m`, `250us`.

use tessera_core::ids::Time;

/// Parse a duration into nanoseconds; the error says what is accepted.
pub fn parse(s: &str) -> Result<Time, String> {
    let s = s.trim();
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .ok_or_else(|| format!("'{s}' has no unit: use e.g. 500ms, 10s, 2m"))?;
    let (num, unit) = s.split_at(split);
    let n: f64 = num
        .parse()
        .map_err(|_| format!("'{s}' is not a duration: use e.g. 500ms, 10s, 2m"))?;
    let scale = match unit {
        "ns" => 1.0,
        "us" | "µs" => 1e3,
        "ms" => 1e6,
        "s" => 1e9,
        "m" | "min" => 60e9,
        _ => return Err(format!("'{s}': unknown unit '{unit}' (ns, us, ms, s, m)")),
    };
    let t = n * scale;
    if !t.is_finite() || t <= 0.0 || t > 1e15 {
        return Err(format!("'{s}' must be positive and at most ~11 days"));
    }
    Ok(t as Time)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_units_and_rejects_garbage() {
        assert_eq!(parse("10s"), Ok(10_000_000_000));
        assert_eq!(parse("1.5ms"), Ok(1_500_000));
        assert_eq!(parse("2m"), Ok(120_000_000_000));
        assert!(parse("10").is_err());
        assert!(parse("ten s").is_err());
        assert!(parse("5 parsecs").is_err());
        assert!(parse("0s").is_err());
        assert!(parse("-1s").is_err());
    }
}
