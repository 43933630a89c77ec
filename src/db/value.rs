//! One value of a row as text: what a `{column}` placeholder becomes, a key as a
//! person writes it (and reads it back), and dates and times as ISO-8601.

use std::borrow::Cow;

use mysql_async::consts::ColumnType;
use mysql_async::Value;

/// What [`value_text`] puts before the hex digits of bytes it cannot show as text.
pub const HEX_PREFIX: &str = "hex:";

/// A value as a person would write it, and never two values as the same text: text
/// as itself; bytes that are not UTF-8, or hold a NUL (which no environment
/// variable or argument can carry), or begin with `hex:` themselves, as `hex:` and
/// their bytes in lowercase hex (a BINARY(16) UUID: `hex:00a1…`); anything else as
/// its SQL literal.
pub fn value_text(value: &Value) -> String {
    match value {
        Value::Bytes(bytes) => match std::str::from_utf8(bytes) {
            Ok(text) if !text.contains('\0') && !text.starts_with(HEX_PREFIX) => text.to_string(),
            _ => {
                let mut hex = String::with_capacity(HEX_PREFIX.len() + bytes.len() * 2);
                hex.push_str(HEX_PREFIX);
                for byte in bytes {
                    hex.push_str(&format!("{byte:02x}"));
                }
                hex
            }
        },
        other => other.as_sql(false),
    }
}

/// A key as an operator writes it — as tableq prints it: text, or `hex:` and the
/// bytes in hex for a key that is not text ([`value_text`]'s inverse).
pub fn key_from_text(text: &str) -> Value {
    let hex = text.strip_prefix(HEX_PREFIX).filter(|h| h.len() % 2 == 0);
    let bytes = hex.and_then(|h| {
        h.as_bytes()
            .chunks(2)
            .map(|pair| u8::from_str_radix(std::str::from_utf8(pair).ok()?, 16).ok())
            .collect::<Option<Vec<u8>>>()
    });
    Value::Bytes(bytes.unwrap_or_else(|| text.as_bytes().to_vec()))
}

/// One value as the text a `{column}` placeholder becomes: bytes as they are, NULL
/// as nothing, numbers and times as in the JSON body.
pub fn value_bytes(value: &Value, column_type: ColumnType) -> Cow<'_, [u8]> {
    match value {
        Value::NULL => Cow::Borrowed(b""),
        Value::Bytes(bytes) => Cow::Borrowed(bytes),
        Value::Int(i) => Cow::Owned(i.to_string().into_bytes()),
        Value::UInt(u) => Cow::Owned(u.to_string().into_bytes()),
        Value::Float(f) => Cow::Owned(f.to_string().into_bytes()),
        Value::Double(d) => Cow::Owned(d.to_string().into_bytes()),
        Value::Date(..) | Value::Time(..) => {
            Cow::Owned(temporal_text(value, column_type).into_bytes())
        }
    }
}

/// ISO-8601 text for DATE, DATETIME/TIMESTAMP and TIME values.
pub fn temporal_text(value: &Value, column_type: ColumnType) -> String {
    match *value {
        Value::Date(year, month, day, hour, minute, second, micros) => {
            let date = format!("{year:04}-{month:02}-{day:02}");
            if matches!(
                column_type,
                ColumnType::MYSQL_TYPE_DATE | ColumnType::MYSQL_TYPE_NEWDATE
            ) {
                date
            } else {
                format!(
                    "{date}T{hour:02}:{minute:02}:{second:02}{}",
                    fraction(micros)
                )
            }
        }
        Value::Time(negative, days, hour, minute, second, micros) => {
            let hours = days * 24 + u32::from(hour);
            let sign = if negative { "-" } else { "" };
            format!(
                "{sign}{hours:02}:{minute:02}:{second:02}{}",
                fraction(micros)
            )
        }
        _ => String::new(),
    }
}

fn fraction(micros: u32) -> String {
    if micros == 0 {
        String::new()
    } else {
        format!(".{micros:06}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_written_as_tableq_prints_it_is_the_same_value() {
        for value in [
            Value::Bytes(b"42".to_vec()),
            Value::Bytes(vec![0, 0xff, 7]),
            Value::Bytes("héllo".as_bytes().to_vec()),
        ] {
            assert_eq!(key_from_text(&value_text(&value)), value);
        }
        assert_eq!(key_from_text("hex:zz"), Value::Bytes(b"hex:zz".to_vec()));
        assert_eq!(
            key_from_text("hex:aéb"),
            Value::Bytes("hex:aéb".as_bytes().to_vec())
        );
    }

    /// Distinct keys give distinct texts: bytes that are not text, a NUL, and text
    /// that looks like the encoding itself.
    #[test]
    fn keys_that_are_not_text_are_hex() {
        let text = |bytes: &[u8]| value_text(&Value::Bytes(bytes.to_vec()));
        assert_eq!(text(b"order-7"), "order-7");
        assert_eq!(text(&[0x00, 0x11, 0xab]), "hex:0011ab");
        assert_ne!(text(&[0xfe]), text(&[0xff]));
        assert_eq!(text(b"hex:ff"), "hex:6865783a6666");
        assert_ne!(text(b"hex:ff"), text(&[0xff]));
        assert_eq!(value_text(&Value::Int(7)), "7");
    }
}
