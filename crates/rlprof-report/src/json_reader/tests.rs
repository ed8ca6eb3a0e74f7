//! The reader against serde_json: what each accepts and rejects, and the values read.

use super::*;

/// Our verdict on a whole document (one value, then only whitespace).
fn ours(doc: &str) -> Result<&str> {
    let mut r = Reader::new(doc, 0);
    let v = r.value(0)?;
    r.ws();
    if r.pos != doc.len() {
        return Err(r.err("trailing characters"));
    }
    Ok(v)
}

fn corpus() -> Vec<String> {
    let mut v: Vec<String> = [
        "null",
        "true",
        "false",
        "nul",
        "tru",
        "0",
        "-0",
        "01",
        "-",
        "1.",
        ".5",
        "1.5",
        "1e5",
        "1E+5",
        "1e-5",
        "1e",
        "1e+",
        "-1.25e-3",
        "1e400",
        "-1e400",
        "1e308",
        "123456789012345678901234567890",
        "\"\"",
        "\"a\"",
        "\"\\n\\t\\\"\\\\\\/\\b\\f\\r\"",
        "\"\\x\"",
        "\"\\u00e9\"",
        "\"\\u00G9\"",
        "\"\\ud83d\\ude00\"",
        "\"\\ud83d\"",
        "\"\\ude00\"",
        "\"\\ud83dx\"",
        "\"\\ud83d\\u0041\"",
        "\"a\u{1}b\"",
        "\"tab\there\"",
        "\"é ü 中文 😀\"",
        "\"unterminated",
        "[]",
        "[1,2]",
        "[1,]",
        "[,1]",
        "[1 2]",
        "{}",
        "{\"a\":1}",
        "{\"a\":1,}",
        "{\"a\" 1}",
        "{a:1}",
        "{\"a\":1 \"b\":2}",
        "{\"a\":[{\"b\":[]}],\"c\":{\"d\":null}}",
        " \n\t\r[ 1 , { \"x\" : \"y\" } ] \n",
        "[1]x",
        "[1]]",
        "{\"a\":1}}",
        "",
        " ",
        "[\"a\u{7f}\"]",
        "[1,[2,[3,[4]]]]",
        "{\"\":\"\"}",
        "[-]",
        "[--1]",
        "[+1]",
        "[0x10]",
        "[1.0e+]",
        "[\"\\u12\"]",
        "[Infinity]",
        "[NaN]",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    for d in [126, 127, 128, 129] {
        v.push(format!("{}{}", "[".repeat(d), "]".repeat(d)));
        v.push(format!("{}1{}", "[".repeat(d), "]".repeat(d)));
        v.push(format!("{}{}", "{\"a\":".repeat(d), "}".repeat(d)).replace(":}", ":1}"));
    }
    // Truncations of a valid document fail at every cut, as serde_json does.
    let whole = r#"{"a":[1,-2.5e3,"x\u00e9\ud83d\ude00",true,null,{"b":{}}],"c":"d"}"#;
    for i in 0..whole.len() {
        if whole.is_char_boundary(i) {
            v.push(whole[..i].to_string());
        }
    }
    v.push(whole.to_string());
    v
}

#[test]
fn accepts_and_rejects_exactly_what_serde_json_does() {
    for doc in corpus() {
        let want = serde_json::from_str::<serde_json::Value>(&doc);
        let got = ours(&doc);
        assert_eq!(
            got.is_ok(),
            want.is_ok(),
            "{doc:?}: ours {got:?}, serde_json {want:?}"
        );
        if let Ok(v) = want {
            // Same value, and the span is the whole value.
            let span = got.unwrap();
            assert_eq!(serde_json::from_str::<serde_json::Value>(span).unwrap(), v);
            assert_eq!(span, doc.trim_matches([' ', '\n', '\t', '\r']));
        }
    }
}

#[test]
fn digit_runs_end_at_the_first_non_digit_byte() {
    for c in 0..=255u8 {
        for run in [0, 1, 7, 8, 9, 15, 16, 23] {
            for tail in [0, 1, 9] {
                let mut b = vec![b'5'; run];
                b.push(c);
                b.extend(std::iter::repeat_n(b'1', tail));
                let text = String::from_utf8_lossy(&b).into_owned();
                let mut r = Reader::new(&text, 0);
                let want = text.bytes().take_while(u8::is_ascii_digit).count();
                assert_eq!(r.digits(), want, "{c} {run} {tail}");
                assert_eq!(r.pos, want);
            }
        }
    }
}

#[test]
fn depth_errors_are_told_apart_and_deep_input_does_not_overflow_the_stack() {
    let deep = "[".repeat(1_000_000);
    assert_eq!(ours(&deep).unwrap_err().kind, ErrorKind::Depth);
    let ok = format!("{}{}", "[".repeat(127), "]".repeat(127));
    assert!(ours(&ok).is_ok());
    let too = format!("{}{}", "[".repeat(128), "]".repeat(128));
    assert_eq!(ours(&too).unwrap_err().kind, ErrorKind::Depth);
}

#[test]
fn strings_decode_like_serde_json() {
    for s in [
        r#""plain""#,
        r#""a\"b\\c\/d\be\ff\ng\rh\ti""#,
        r#""\u0000\u001f\u00e9\u4e2d\ud83d\ude00""#,
        "\"\u{e9}\u{4e2d}\u{1F600}\"",
        r#""<script>\u003c/script>""#,
    ] {
        let want: String = serde_json::from_str(s).unwrap();
        let got = Reader::new(s, 0).string().unwrap();
        assert_eq!(got.text(), want, "{s}");
        assert_eq!(value_text(s), want, "{s}");
    }
}

#[test]
fn compact_text_equals_serde_json_value_to_string() {
    for raw in [
        r#"[[4, 8], [8, 16]]"#,
        r#"["float32", "float32"]"#,
        r#"{"b": 1, "a": [1, 2.50, -0], "a": "dup wins"}"#,
        r#"[1e3, 1.5E-2, -0, -0.0, 0.1, 12345678901234567890, -12]"#,
        r#""esc\u0041\/""#,
        r#"[true, false, null, "x\ty"]"#,
        r#"{"nested": {"z": 1, "y": [{"k": "v"}]}}"#,
        r#"123"#,
        r#"-9223372036854775808"#,
    ] {
        let v: serde_json::Value = serde_json::from_str(raw).unwrap();
        let mut got = String::new();
        compact(raw, &mut got);
        assert_eq!(got, v.to_string(), "{raw}");
    }
}

#[test]
fn numbers_convert_like_serde_json() {
    for tok in [
        "0",
        "-0",
        "1",
        "-17",
        "1700000000123.456",
        "0.001",
        "80.125",
        "9007199254740993",
        "123456789.123456789",
        "1e3",
        "1.5e-7",
        "-2.5",
        "0.30000000000000004",
        "18446744073709551615",
        "18446744073709551616",
    ] {
        let v: serde_json::Value = serde_json::from_str(tok).unwrap();
        let want_i = v.as_i64().or_else(|| v.as_f64().map(|f| f as i64));
        assert_eq!(value_i64(tok), want_i, "{tok}");
    }
    assert_eq!(value_i64("\" 42 \""), Some(42));
    assert_eq!(value_i64("\"x\""), None);
    assert_eq!(value_i64("[1]"), None);
}
