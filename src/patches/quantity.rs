//! A resource.Quantity as Go writes it after a decode: its canonical form (`0.5` → `500m`,
//! `1024Mi` → `1Gi`, `2000m` → `2`). The value is kept exactly; the suffix is the largest that
//! leaves an integer; binary suffixes stay binary when the value is a whole number ≥ 1024.

use serde_json::Value;

#[derive(Clone, Copy, PartialEq)]
enum Format {
    BinarySi,
    DecimalSi,
    DecimalExponent,
}

/// The canonical text of a Quantity given as a JSON string or number.
pub(crate) fn canonical(v: &Value) -> Result<String, String> {
    let text = match v {
        Value::String(s) => s.trim().to_string(),
        // A number went through Go's float64: written without an exponent below 1e21.
        Value::Number(n) => match (n.as_i64(), n.as_f64()) {
            (Some(i), _) => i.to_string(),
            (None, Some(f)) => format!("{f}"),
            _ => n.to_string(),
        },
        other => return Err(format!("a quantity must be a string or a number, not {other}")),
    };
    let bad = || {
        format!("quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$': {text:?}")
    };
    let (neg, rest) = match text.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, text.strip_prefix('+').unwrap_or(&text)),
    };
    let split = rest.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(rest.len());
    let (num, suffix) = rest.split_at(split);
    let (int_part, frac_part) = num.split_once('.').unwrap_or((num, ""));
    if num.is_empty() || num == "." || frac_part.contains('.') {
        return Err(bad());
    }
    let (format, pow2, pow10) = match suffix {
        "" => (Format::DecimalSi, 0, 0),
        "Ki" => (Format::BinarySi, 10, 0),
        "Mi" => (Format::BinarySi, 20, 0),
        "Gi" => (Format::BinarySi, 30, 0),
        "Ti" => (Format::BinarySi, 40, 0),
        "Pi" => (Format::BinarySi, 50, 0),
        "Ei" => (Format::BinarySi, 60, 0),
        "n" => (Format::DecimalSi, 0, -9),
        "u" => (Format::DecimalSi, 0, -6),
        "m" => (Format::DecimalSi, 0, -3),
        "k" => (Format::DecimalSi, 0, 3),
        "M" => (Format::DecimalSi, 0, 6),
        "G" => (Format::DecimalSi, 0, 9),
        "T" => (Format::DecimalSi, 0, 12),
        "P" => (Format::DecimalSi, 0, 15),
        "E" => (Format::DecimalSi, 0, 18),
        s if s.starts_with(['e', 'E']) => (Format::DecimalExponent, 0, s[1..].parse::<i32>().map_err(|_| bad())?),
        _ => return Err(bad()),
    };
    // value = digits × 10^exp10 × 2^pow2, kept as an integer mantissa.
    let digits = format!("{int_part}{frac_part}");
    let mut mantissa: i128 = digits.trim_start_matches('0').parse::<i128>().unwrap_or(0);
    if digits.len() > 30 {
        return Err(format!("{text:?}: too many digits for kubestrap's quantity arithmetic"));
    }
    let mut exp10 = pow10 - frac_part.len() as i32;
    if mantissa == 0 {
        return Ok("0".into());
    }
    mantissa <<= pow2;
    // Go keeps nano precision at most, rounding up.
    while exp10 < -9 {
        mantissa = (mantissa + 9) / 10;
        exp10 += 1;
    }
    let sign = if neg { "-" } else { "" };
    let whole = if exp10 >= 0 {
        mantissa.checked_mul(10i128.checked_pow(exp10 as u32).unwrap_or(0))
    } else {
        let d = 10i128.pow(exp10.unsigned_abs());
        (mantissa % d == 0).then(|| mantissa / d)
    };
    if format == Format::BinarySi
        && let Some(w) = whole
        && w >= 1024
    {
        let (mut m, mut k) = (w, 0);
        while m % 1024 == 0 && k < 6 {
            m /= 1024;
            k += 1;
        }
        return Ok(format!("{sign}{m}{}", ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"][k]));
    }
    // Decimal: the exponent a multiple of 3, as large as the integer mantissa allows.
    while exp10.rem_euclid(3) != 0 {
        mantissa *= 10;
        exp10 -= 1;
    }
    while mantissa % 1000 == 0 {
        mantissa /= 1000;
        exp10 += 3;
    }
    let suffix = if format == Format::DecimalExponent {
        if exp10 == 0 { String::new() } else { format!("e{exp10}") }
    } else {
        match exp10 {
            -9 => "n".into(),
            -6 => "u".into(),
            -3 => "m".into(),
            0 => String::new(),
            3 => "k".into(),
            6 => "M".into(),
            9 => "G".into(),
            12 => "T".into(),
            15 => "P".into(),
            e if e >= 18 => {
                mantissa *= 10i128.pow((e - 18) as u32);
                "E".into()
            }
            _ => String::new(),
        }
    };
    Ok(format!("{sign}{mantissa}{suffix}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn canonical_forms_as_go_writes_them() {
        for (given, want) in [
            (json!("0.5"), "500m"),
            (json!("1024Mi"), "1Gi"),
            (json!("2000m"), "2"),
            (json!(1e9), "1G"),
            (json!("250m"), "250m"),
            (json!("1.5Gi"), "1536Mi"),
            (json!("512"), "512"),
            (json!("0.5Ki"), "512"),
            (json!(1), "1"),
            (json!("100M"), "100M"),
            (json!("1e3"), "1e3"),
            (json!("0"), "0"),
            (json!("-1.5"), "-1500m"),
        ] {
            assert_eq!(canonical(&given).unwrap(), want, "{given}");
        }
        assert!(canonical(&json!("1x")).is_err());
        assert!(canonical(&json!(true)).is_err());
    }
}
