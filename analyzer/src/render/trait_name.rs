//! The name KubeVela gives a trait output that has none: `<component>-<type>-<hash>`
//! (`pkg/oam/util/helper.go`, `GenTraitName` and `ComputeHash`).
//!
//! The hash is FNV-32a over go-spew's `%#v` dump of the `unstructured.Unstructured` holding the
//! object (`DeepHashObject`: keys sorted, methods disabled), its decimal value encoded with
//! `rand.SafeEncodeString`. The dump is reproduced here byte for byte from the JSON value as
//! Kubernetes' unstructured decoder holds it: objects are `map[string]interface {}`, arrays
//! `[]interface {}`, integers `int64`, other numbers `float64`, `null` a nil interface.
//! KubeVela hashes the object as the render left it (the render labels, without
//! `app.oam.dev/appRevision`), before the OAM contract's labels and annotations.

use serde_json::Value;

/// `<component>-<type>-<hash>` for the unnamed output `object` of trait `trait_type`.
pub(crate) fn generated_trait_name(component: &str, trait_type: &str, object: &Value) -> String {
    let mut dump = String::from("(unstructured.Unstructured){Object:");
    match object {
        Value::Object(_) => spew_value(object, &mut dump),
        // `Unstructured.Object` is a nil map for anything else; a render never gets here.
        _ => dump.push_str("(map[string]interface {})<nil>"),
    }
    dump.push('}');
    format!(
        "{component}-{}-{}",
        trait_type.to_lowercase(),
        safe_encode(fnv32a(dump.as_bytes()))
    )
}

/// go-spew's `%#v` of one value held in an `interface {}` (its dynamic type, then the value).
fn spew_value(value: &Value, out: &mut String) {
    match value {
        Value::Null => out.push_str("(interface {})<nil>"),
        Value::Bool(flag) => {
            out.push_str("(bool)");
            out.push_str(if *flag { "true" } else { "false" });
        }
        Value::Number(number) => match number.as_i64() {
            Some(int) => {
                out.push_str("(int64)");
                out.push_str(&int.to_string());
            }
            None => {
                out.push_str("(float64)");
                out.push_str(&go_format_float(number.as_f64().unwrap_or(0.0)));
            }
        },
        // Strings are written raw: no quotes, no escapes.
        Value::String(text) => {
            out.push_str("(string)");
            out.push_str(text);
        }
        Value::Array(items) => {
            out.push_str("([]interface {})[");
            for (index, item) in items.iter().enumerate() {
                if index > 0 {
                    out.push(' ');
                }
                spew_value(item, out);
            }
            out.push(']');
        }
        Value::Object(map) => {
            out.push_str("(map[string]interface {})map[");
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            // Go compares strings bytewise, as Rust's `str` ordering does.
            entries.sort_by(|a, b| a.0.cmp(b.0));
            for (index, (key, item)) in entries.into_iter().enumerate() {
                if index > 0 {
                    out.push(' ');
                }
                out.push_str(key);
                out.push(':');
                spew_value(item, out);
            }
            out.push(']');
        }
    }
}

/// Go's `strconv.FormatFloat(value, 'g', -1, 64)`: the shortest digits, in exponent form when
/// the decimal exponent is below -4 or at least 6 (with the shortest precision, Go decides as
/// for precision 6), e.g. `1e+06`, `123456`, `1e-05`.
fn go_format_float(value: f64) -> String {
    if value == 0.0 {
        return if value.is_sign_negative() { "-0" } else { "0" }.to_owned();
    }
    // Rust's `{:e}` gives the shortest round-trip digits: `-1.2345e6`.
    let scientific = format!("{value:e}");
    let (mantissa, exponent) = scientific
        .split_once('e')
        .unwrap_or((scientific.as_str(), "0"));
    let exponent: i32 = exponent.parse().unwrap_or(0);
    let (sign, mantissa) = match mantissa.strip_prefix('-') {
        Some(rest) => ("-", rest),
        None => ("", mantissa),
    };
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    if !(-4..6).contains(&exponent) {
        let (first, rest) = digits.split_at(1);
        let fraction = if rest.is_empty() {
            String::new()
        } else {
            format!(".{rest}")
        };
        let exponent_sign = if exponent < 0 { '-' } else { '+' };
        return format!(
            "{sign}{first}{fraction}e{exponent_sign}{:02}",
            exponent.unsigned_abs()
        );
    }
    // Plain form: the decimal point goes `exponent + 1` digits in.
    let point = exponent + 1;
    let text = if point <= 0 {
        format!("0.{}{digits}", "0".repeat(point.unsigned_abs() as usize))
    } else if point as usize >= digits.len() {
        format!("{digits}{}", "0".repeat(point as usize - digits.len()))
    } else {
        let (whole, fraction) = digits.split_at(point as usize);
        format!("{whole}.{fraction}")
    };
    format!("{sign}{text}")
}

fn fnv32a(bytes: &[u8]) -> u32 {
    let mut hash: u32 = 0x811c_9dc5;
    for byte in bytes {
        hash ^= u32::from(*byte);
        hash = hash.wrapping_mul(0x0100_0193);
    }
    hash
}

/// Kubernetes' `rand.SafeEncodeString` of the decimal text of `hash`: each byte mapped into an
/// alphabet without vowels, so no words are formed.
fn safe_encode(hash: u32) -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    hash.to_string()
        .bytes()
        .map(|byte| ALPHABET[usize::from(byte) % ALPHABET.len()] as char)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn names_a_service_as_kubevela_does() {
        // vela dry-run's name for the `ingress` trait's Service in KubeVela's
        // docs/examples/app-with-status (the conformance reference).
        let service = json!({
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"labels": {
                "app.oam.dev/component": "myweb",
                "app.oam.dev/name": "application-sample",
                "trait.oam.dev/resource": "service",
                "trait.oam.dev/type": "ingress",
            }},
            "spec": {
                "ports": [{"port": 80, "targetPort": 80}],
                "selector": {"app": "myweb"},
            },
        });
        assert_eq!(
            generated_trait_name("myweb", "Ingress", &service),
            "myweb-ingress-b7f6d99d8"
        );
    }

    #[test]
    fn dumps_every_json_type_as_go_spew() {
        // The expected text is go-spew v1.1.1's output for the same map (keys sorted bytewise).
        let object = json!({
            "n": null, "f": 1.0, "g": 1e6, "h": 123456.0, "i": 0.00001, "j": 1.5e-7,
            "k": [], "l": {}, "b": false, "B": "x y", "e": "",
        });
        let mut dump = String::new();
        spew_value(&object, &mut dump);
        assert_eq!(
            dump,
            "(map[string]interface {})map[B:(string)x y b:(bool)false e:(string) \
             f:(float64)1 g:(float64)1e+06 h:(float64)123456 i:(float64)1e-05 \
             j:(float64)1.5e-07 k:([]interface {})[] l:(map[string]interface {})map[] \
             n:(interface {})<nil>]"
        );
    }

    #[test]
    fn floats_format_as_go_g() {
        for (value, expected) in [
            (0.5, "0.5"),
            (-2.25, "-2.25"),
            (100000.0, "100000"),
            (1e21, "1e+21"),
            (0.0001, "0.0001"),
            (1.234567e-5, "1.234567e-05"),
            (1234567.0, "1.234567e+06"),
        ] {
            assert_eq!(go_format_float(value), expected, "{value}");
        }
    }
}
