//! Numbers read as memcached reads them: C's `strtoull`/`strtol` on a
//! 64-bit system, then memcached's checks (`safe_strtoull` and its
//! siblings). A reply matches memcached's only if the number it read does:
//! `+5` and `-0` are numbers, a flag of 2³² reads as 0 (memcached stores
//! the low 32 bits of what it read), and an exptime past 2³¹ wraps.

/// C's `isspace` in the C locale.
pub(crate) fn is_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
}

/// What C's `strtoull`/`strtoll` found at the start of a string.
struct Parsed {
    /// A minus sign came before the digits.
    negative: bool,
    /// The digits' value, or `None` past 2⁶⁴ - 1 (`ERANGE`).
    magnitude: Option<u64>,
    /// Where the number ended; 0 if there were no digits (C's `endptr`
    /// left at the start).
    end: usize,
}

/// The number at the start of `s`: leading white space, a sign, decimal
/// digits. `s` ends at its first NUL, as a C string does.
fn parse(s: &[u8]) -> Parsed {
    let mut i = s.iter().take_while(|&&b| is_space(b)).count();
    let negative = s.get(i) == Some(&b'-');
    if matches!(s.get(i), Some(b'-' | b'+')) {
        i += 1;
    }
    let start = i;
    let mut magnitude = Some(0u64);
    while let Some(d) = s.get(i).filter(|b| b.is_ascii_digit()) {
        magnitude = magnitude
            .and_then(|m| m.checked_mul(10))
            .and_then(|m| m.checked_add(u64::from(d - b'0')));
        i += 1;
    }
    Parsed {
        negative,
        magnitude,
        end: if i == start { 0 } else { i },
    }
}

/// Whether a number that ended at `end` ends where memcached wants it to:
/// at white space or at the end of the string (a NUL or the slice's end).
fn ends_well(s: &[u8], end: usize) -> bool {
    end > 0 && s.get(end).is_none_or(|&b| b == 0 || is_space(b))
}

/// memcached's `safe_strtoull`: a 64-bit unsigned number (C's wrapping
/// negation for a minus sign, unless the result has its top bit set).
pub(crate) fn strtoull(s: &[u8]) -> Option<u64> {
    let p = parse(s);
    let value = p.magnitude?;
    if !ends_well(s, p.end) {
        return None;
    }
    let value = if p.negative {
        value.wrapping_neg()
    } else {
        value
    };
    // memcached refuses a minus sign only where the result, read as
    // signed, is negative; it looks for one anywhere in the string.
    let c_string = &s[..s.iter().position(|&b| b == 0).unwrap_or(s.len())];
    if (value as i64) < 0 && c_string.contains(&b'-') {
        return None;
    }
    Some(value)
}

/// memcached's `safe_strtoul`: `strtoull`'s reading, kept to its low 32
/// bits (memcached stores `unsigned long` into a 32-bit integer).
pub(crate) fn strtoul(s: &[u8]) -> Option<u32> {
    strtoull(s).map(|v| v as u32)
}

/// memcached's `safe_strtol`: a signed 64-bit number (out of that range:
/// refused), kept to its low 32 bits.
pub(crate) fn strtol(s: &[u8]) -> Option<i32> {
    let p = parse(s);
    let magnitude = p.magnitude?;
    if !ends_well(s, p.end) {
        return None;
    }
    let value = if p.negative {
        if magnitude > 1 << 63 {
            return None;
        }
        (magnitude as i64).wrapping_neg()
    } else {
        i64::try_from(magnitude).ok()?
    };
    Some(value as i32)
}

#[cfg(test)]
mod tests {
    use super::{strtol, strtoul, strtoull};

    #[test]
    fn read_as_c_reads_them() {
        assert_eq!(strtoull(b"42"), Some(42));
        assert_eq!(strtoull(b"+5"), Some(5));
        assert_eq!(strtoull(b" \t7"), Some(7));
        assert_eq!(strtoull(b"-0"), Some(0));
        assert_eq!(strtoull(b"-1"), None);
        assert_eq!(strtoull(b"18446744073709551615"), Some(u64::MAX));
        assert_eq!(strtoull(b"18446744073709551616"), None);
        // Stops at white space or a NUL; anything else after it refuses.
        assert_eq!(strtoull(b"12 ab"), Some(12));
        assert_eq!(strtoull(b"12\r\n"), Some(12));
        assert_eq!(strtoull(b"12\0x"), Some(12));
        assert_eq!(strtoull(b"12x"), None);
        assert_eq!(strtoull(b""), None);
        assert_eq!(strtoull(b" "), None);
        assert_eq!(strtoull(b"-"), None);
        assert_eq!(strtoul(b"4294967296"), Some(0));
        assert_eq!(strtoul(b"4294967297"), Some(1));
        assert_eq!(strtol(b"-1"), Some(-1));
        assert_eq!(strtol(b"2147483648"), Some(i32::MIN));
        assert_eq!(strtol(b"9223372036854775807"), Some(-1));
        assert_eq!(strtol(b"9223372036854775808"), None);
        assert_eq!(strtol(b"-9223372036854775808"), Some(0));
        assert_eq!(strtol(b"-9223372036854775809"), None);
    }
}
