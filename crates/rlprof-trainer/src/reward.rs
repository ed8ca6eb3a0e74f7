//! Rule-based rewards: exact answer match for the built-in arithmetic task, expression checking
//! for countdown, GSM8K-style `#### answer` extraction, and DAPO's overlong reward shaping.

use crate::data::{COUNTDOWN, eval_expr};

/// Reward of `response` for a prompt of `data_source` with answer `ground_truth`: 1 or 0.
pub fn score(data_source: &str, prompt: &str, response: &str, ground_truth: &str) -> f32 {
    let ok = if data_source.contains("gsm8k") {
        extract_gsm8k(response).is_some_and(|a| same_number(&a, ground_truth))
    } else if data_source == COUNTDOWN {
        countdown_ok(prompt, response.trim(), ground_truth)
    } else {
        response.trim() == ground_truth.trim()
    };
    ok as u8 as f32
}

/// The answer after the last `####`, without commas and `$`.
pub fn extract_gsm8k(text: &str) -> Option<String> {
    let (_, after) = text.rsplit_once("####")?;
    let ans: String = after
        .trim()
        .chars()
        .take_while(|c| !c.is_whitespace())
        .filter(|c| *c != ',' && *c != '$')
        .collect();
    (!ans.is_empty()).then_some(ans)
}

fn same_number(a: &str, b: &str) -> bool {
    match (a.parse::<f64>(), b.trim().replace(',', "").parse::<f64>()) {
        (Ok(x), Ok(y)) => (x - y).abs() < 1e-6,
        _ => a == b.trim(),
    }
}

/// Uses each prompt number exactly once and evaluates to the target.
fn countdown_ok(prompt: &str, expr: &str, target: &str) -> bool {
    let Some((nums, _)) = prompt.trim_end_matches('=').split_once(':') else {
        return false;
    };
    let mut want: Vec<&str> = nums.split(',').collect();
    let mut got: Vec<&str> = expr.split(['+', '-', '*']).collect();
    want.sort_unstable();
    got.sort_unstable();
    want == got && eval_expr(expr).is_some_and(|v| v.to_string() == target.trim())
}

/// DAPO overlong shaping: 0 up to `max_len - buffer`, then linearly down to `-penalty` at
/// `max_len` (responses cut at the limit get the full penalty).
pub fn overlong_penalty(len: usize, max_len: usize, buffer: usize, penalty: f32) -> f32 {
    let expected = max_len.saturating_sub(buffer);
    if len <= expected || buffer == 0 {
        return 0.0;
    }
    -((len - expected) as f32 / buffer as f32).min(1.0) * penalty
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gsm8k_answers_are_extracted() {
        assert_eq!(
            extract_gsm8k("so 3*4=12\n#### 1,200").as_deref(),
            Some("1200")
        );
        assert_eq!(extract_gsm8k("no marker"), None);
        assert_eq!(score("openai/gsm8k", "", "x #### $72", "72"), 1.0);
        assert_eq!(score("openai/gsm8k", "", "x #### 71", "72"), 0.0);
    }

    #[test]
    fn exact_and_countdown_rewards() {
        assert_eq!(score("rlprof/arithmetic", "1+2=", "3", "3"), 1.0);
        assert_eq!(score("rlprof/arithmetic", "1+2=", "4", "3"), 0.0);
        assert_eq!(score(COUNTDOWN, "3,5,7:22=", "3*5+7", "22"), 1.0);
        assert_eq!(score(COUNTDOWN, "3,5,7:22=", "7+5*3", "22"), 1.0);
        assert_eq!(score(COUNTDOWN, "3,5,7:22=", "22", "22"), 0.0);
        assert_eq!(score(COUNTDOWN, "3,5,7:22=", "3*5+8", "22"), 0.0);
    }

    #[test]
    fn overlong_penalty_is_linear_in_the_buffer() {
        assert_eq!(overlong_penalty(6, 10, 4, 1.0), 0.0);
        assert_eq!(overlong_penalty(8, 10, 4, 1.0), -0.5);
        assert_eq!(overlong_penalty(10, 10, 4, 2.0), -2.0);
    }
}
